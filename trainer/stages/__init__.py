"""The training stages, one module each: grpo_single (a), rft (b), critic (c), grpo_multi (d). Each builds its
TRL trainer from the pipeline's settings, trains, and saves the policy it produced under its stage directory."""
