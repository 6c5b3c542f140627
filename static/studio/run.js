// The run page: a websocket that replays what this page has not seen (after=<last seq>) and then
// streams live events. On a drop it reconnects with the last seq it rendered, so nothing is missed
// or shown twice; it never renders an event whose seq it already has.
(function () {
  const root = document.getElementById("run");
  const runId = root.dataset.run;
  const list = document.getElementById("events");
  const status = document.getElementById("run-status");
  const stage = document.getElementById("run-stage");
  const best = document.getElementById("best-speedup");
  const message = document.getElementById("run-message");
  const conn = document.getElementById("connection");
  let lastSeq = 0;
  let finished = false;
  let delay = 500;

  function el(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }
  function fmt(x, d) { return x === null || x === undefined ? "–" : Number(x).toFixed(d); }

  function render(ev) {
    if (ev.seq <= lastSeq) return;
    lastSeq = ev.seq;
    const p = ev.payload || {};
    const li = el("li"); li.dataset.seq = ev.seq; li.className = "event event-" + ev.kind;
    let line = "#" + ev.seq + " " + ev.kind;
    if (ev.kind === "step_started") { line += ": " + p.stage + (p.attempt > 1 ? " (attempt " + p.attempt + (p.resumed ? ", resumed" : "") + ")" : ""); stage.textContent = p.stage; status.textContent = "running"; }
    if (ev.kind === "build") line += ": " + (p.ok ? "built" : "failed") + " (" + p.backend + ", " + fmt(p.seconds, 2) + " s, " + p.cache_hits + " cached, " + p.cache_misses + " compiled)";
    if (ev.kind === "verification") line += ": " + p.status + " at " + p.stage + " — " + p.message;
    if (ev.kind === "timing") line += ": " + fmt(p.candidate_ms, 4) + " ms vs eager " + fmt(p.eager_ms, 4) + " ms";
    if (ev.kind === "run_finished") { line += ": " + p.status + " — " + p.message; status.textContent = p.status; message.textContent = p.message; finished = true;
      const cancel = document.getElementById("cancel-form"); if (cancel) cancel.remove(); }
    li.appendChild(el("span", line));
    if (ev.kind === "build" && (p.log || p.error)) { const pre = el("pre", (p.error ? p.error + "\n" : "") + (p.log || "")); li.appendChild(pre); }
    if (ev.kind === "verification") {
      const v = document.getElementById("verification");
      v.innerHTML = "";
      v.appendChild(el("p", p.status + (p.correct ? " (correct)" : ""), p.status === "accepted" ? "ok" : "bad"));
      const t = el("table"); t.appendChild(el("tr")).innerHTML = "<th>trial</th><th>inputs</th><th>passed</th><th>max abs</th><th>max rel</th>";
      (p.trials || []).forEach((tr) => { const r = el("tr"); [tr.index, tr.distribution, tr.passed ? "yes" : "NO", tr.max_abs_error.toExponential(2), tr.max_rel_error.toExponential(2)].forEach((c) => r.appendChild(el("td", String(c)))); t.appendChild(r); });
      v.appendChild(t);
      (p.flags || []).forEach((f) => v.appendChild(el("p", "flag " + f.flag + ": " + f.detail, "bad")));
    }
    if (ev.kind === "timing") {
      const r = el("tr"); [p.turn, fmt(p.candidate_ms, 4), fmt(p.eager_ms, 4), fmt(p.compile_ms, 4), fmt(p.speedup_vs_eager, 2) + "x", p.speedup_vs_compile ? fmt(p.speedup_vs_compile, 2) + "x" : "–", p.clock].forEach((c) => r.appendChild(el("td", String(c))));
      document.getElementById("timing").appendChild(r);
    }
    if (ev.kind === "best") best.textContent = fmt(p.speedup_vs_eager, 2) + "x";
    if (ev.kind === "kernel_saved") { const a = el("a", "Kernel saved to the library: " + p.name); a.href = p.url; a.id = "kernel-saved"; document.getElementById("kernel-link").appendChild(a); }
    list.appendChild(li);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + "/ws/runs/" + runId + "/?after=" + lastSeq);
    ws.onopen = () => { conn.textContent = "live"; delay = 500; };
    ws.onmessage = (m) => render(JSON.parse(m.data));
    ws.onclose = () => {
      conn.textContent = finished ? "finished" : "reconnecting…";
      if (!finished) { setTimeout(connect, delay); delay = Math.min(delay * 2, 10000); }
    };
  }
  connect();
})();
