"""Data synthesis and staged RL training on the studio's collected feedback (DESIGN §8).

Plain Python: never imports Django. The studio's `apps/training` launches it as a separate process.
"""
