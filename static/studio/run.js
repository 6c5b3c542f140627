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
  const phase = document.getElementById("run-phase");
  let phaseTimer = null;
  let lastSeq = 0;
  let finished = false;
  let delay = 500;

  function el(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }
  function sci(x) { return typeof x === "number" ? x.toExponential(2) : String(x); }  // "inf" arrives as a string
  function fmt(x, d) { return x === null || x === undefined ? "–" : Number(x).toFixed(d); }

  // What the evaluation is doing now (a "phase" event as each phase starts), with the time spent in it and in the
  // whole evaluation, ticking until the next phase or a result; phases are not added to the event log.
  function showPhase(ev) {
    const p = ev.payload || {};
    const began = Date.parse(ev.at) || Date.now();
    const tick = () => {
      const inPhase = Math.max(0, (Date.now() - began) / 1000);
      phase.textContent = "Now: " + p.what + " · " + fmt(inPhase, 0) + " s in this phase, " + fmt(inPhase + (p.elapsed || 0), 0) +
        " s into the evaluation" + (p.turn !== undefined ? " (turn " + (p.turn + 1) + ")" : "");
    };
    clearInterval(phaseTimer);
    tick();
    phase.hidden = false;
    phase.dataset.shown = String(Number(phase.dataset.shown || 0) + 1);
    phaseTimer = setInterval(tick, 1000);
  }
  function endPhase() { clearInterval(phaseTimer); phaseTimer = null; phase.hidden = true; phase.textContent = ""; }

  function render(ev) {
    if (ev.seq <= lastSeq) return;
    lastSeq = ev.seq;
    const p = ev.payload || {};
    if (ev.kind === "phase") {
      // Kept in the log (every seq is there, in order) but folded away: the phase line above says it live.
      if (!finished) showPhase(ev);
      const item = el("li", "#" + ev.seq + " phase: " + p.what, "event event-phase");
      item.dataset.seq = ev.seq;
      item.hidden = true;
      list.appendChild(item);
      return;
    }
    if (["verification", "timing", "tool_result", "run_finished", "build", "step_started"].includes(ev.kind)) endPhase();
    const li = el("li"); li.dataset.seq = ev.seq; li.className = "event event-" + ev.kind;
    let line = "#" + ev.seq + " " + ev.kind;
    if (ev.kind === "step_started") { line += ": " + p.stage + (p.attempt > 1 ? " (attempt " + p.attempt + (p.resumed ? ", resumed" : "") + ")" : ""); stage.textContent = p.stage; status.textContent = "running"; }
    if (ev.kind === "build") line += ": " + (p.ok ? "built" : "failed") + " (" + p.backend + ", " + fmt(p.seconds, 2) + " s, " + p.cache_hits + " cached, " + p.cache_misses + " compiled)";
    if (ev.kind === "verification") line += ": " + p.status + " at " + p.stage + " — " + p.message;
    if (ev.kind === "timing") line += ": " + fmt(p.candidate_ms, 4) + " ms vs eager " + fmt(p.eager_ms, 4) + " ms";
    if (ev.kind === "run_finished") { line += ": " + p.status + " — " + p.message; status.textContent = p.status; stage.textContent = "done"; message.textContent = p.message; finished = true;
      const cancel = document.getElementById("cancel-form"); if (cancel) cancel.remove();
      refreshPanels(); }
    li.appendChild(el("span", line));
    if (ev.kind === "build" && (p.log || p.error)) { const pre = el("pre", (p.error ? p.error + "\n" : "") + (p.log || "")); li.appendChild(pre); }
    if (ev.kind === "verification") {
      verdictPanel(p);
      candidateRow(p);
      const v = document.getElementById("verification");
      v.innerHTML = "";
      v.appendChild(el("p", p.status + (p.correct ? " (correct)" : ""), p.status === "accepted" ? "ok" : "bad"));
      const t = el("table"); t.appendChild(el("tr")).innerHTML = "<th>trial</th><th>inputs</th><th>passed</th><th>max abs</th><th>max rel</th>";
      (p.trials || []).forEach((tr) => { const r = el("tr"); [tr.index, tr.distribution, tr.passed ? "yes" : "NO", sci(tr.max_abs_error), sci(tr.max_rel_error)].forEach((c) => r.appendChild(el("td", String(c)))); t.appendChild(r); });
      v.appendChild(t);
      (p.flags || []).forEach((f) => v.appendChild(el("p", "flag " + f.flag + ": " + f.detail, "bad")));
    }
    if (ev.kind === "timing") {
      spreadTable(p);
      speedupCell(p);
      // The headline is the speedup over the faster of eager and torch.compile; SOL the share of the speed of light.
      const r = el("tr"); [p.turn, fmt(p.candidate_ms, 4), fmt(p.eager_ms, 4), fmt(p.compile_ms, 4), p.speedup_vs_best ? fmt(p.speedup_vs_best, 2) + "x" : "–", fmt(p.speedup_vs_eager, 2) + "x", p.speedup_vs_compile ? fmt(p.speedup_vs_compile, 2) + "x" : "–", p.sol_fraction ? fmt(100 * p.sol_fraction, 1) + "%" : "–", p.clock].forEach((c) => r.appendChild(el("td", String(c))));
      document.getElementById("timing").appendChild(r);
    }
    if (ev.kind === "best") best.textContent = p.speedup_vs_best ? fmt(p.speedup_vs_best, 2) + "x vs the best of eager and torch.compile" : fmt(p.speedup_vs_eager, 2) + "x vs eager";
    if (agent) agent.render(ev);
    if (ev.kind === "kernel_saved") { const a = el("a", (p.duplicate ? "Already in the library (measurement added): " : "Kernel saved to the library: ") + p.name); a.href = p.url; a.id = "kernel-saved"; document.getElementById("kernel-link").appendChild(a); }
    if (ev.kind === "kernel_not_kept") { const n = el("span", "Not kept in the library: " + p.reason, "hint"); n.id = "kernel-not-kept"; document.getElementById("kernel-link").appendChild(n); }
    list.appendChild(li);
  }

  // The verdict panel follows the newest verdict as it streams; the flags come with their plain words.
  const flagWords = JSON.parse((document.getElementById("flag-words") || {}).textContent || "{}");
  function verdictPanel(p) {
    const body = document.getElementById("verdict-body");
    if (!body) return;
    body.innerHTML = "";
    const trials = p.trials || [];
    const maxAbs = trials.reduce((m, t) => Math.max(m, Number(t.max_abs_error) || 0), 0);
    const maxRel = trials.reduce((m, t) => Math.max(m, Number(t.max_rel_error) || 0), 0);
    const head = body.appendChild(el("p"));
    const st = head.appendChild(el("strong", p.status, p.status === "accepted" ? "ok" : "bad")); st.id = "verdict-status";
    head.appendChild(document.createTextNode(" at " + p.stage + " (candidate " + p.turn + ")" + (p.weights ? " · weights " + p.weights : "") +
      (trials.length ? " · " + trials.length + " trials, max abs error " + sci(maxAbs) + ", max rel error " + sci(maxRel) : "")));
    if (p.message) body.appendChild(el("p", p.message.slice(0, 600), "hint"));
    if (trials.length) {
      const t = body.appendChild(el("table", undefined, "numbers")); t.id = "trials";
      t.appendChild(el("tr")).innerHTML = "<th>trial</th><th>inputs</th><th>passed</th><th>max abs</th><th>max rel</th><th>atol</th><th>rtol</th>";
      trials.forEach((tr) => { const r = el("tr"); [tr.index, tr.distribution, tr.passed ? "yes" : "NO", sci(tr.max_abs_error), sci(tr.max_rel_error), sci(tr.atol), sci(tr.rtol)].forEach((c) => r.appendChild(el("td", String(c)))); t.appendChild(r); });
    }
    const flags = body.appendChild(el("div")); flags.id = "flags";
    (p.flags || []).forEach((f) => {
      const line = flags.appendChild(el("p", undefined, "flag"));
      line.appendChild(el("code", f.flag, "bad"));
      line.appendChild(document.createTextNode(": " + (flagWords[f.flag] || "a finding of the evaluator") + " "));
      line.appendChild(el("span", "(" + f.detail + ")", "hint"));
    });
    if (!(p.flags || []).length) flags.appendChild(el("p", "No flags: none of the evaluator's checks for cheating or unreliable timing fired.", "flag ok"));
  }
  function spreadTable(p) {
    const body = document.getElementById("verdict-body");
    if (!body || !p.spread) return;
    const t = body.appendChild(el("table", undefined, "numbers")); t.id = "timing-spread";
    t.appendChild(el("tr")).innerHTML = "<th>timed</th><th>median ms</th><th>p10 ms</th><th>p90 ms</th><th>min ms</th><th>iterations</th><th>p10–p90 spread</th>";
    [["candidate", "this kernel"], ["eager", "PyTorch eager"], ["compile", "torch.compile"]].forEach(([k, label]) => {
      const s = p.spread[k]; if (!s) return;
      const r = el("tr");
      [label, fmt(s.median_ms, 4), fmt(s.p10_ms, 4), fmt(s.p90_ms, 4), fmt(s.min_ms, 4), s.iterations,
       s.median_ms ? fmt(100 * (s.p90_ms - s.p10_ms) / s.median_ms, 1) + "%" : "–"].forEach((c) => r.appendChild(el("td", String(c))));
      t.appendChild(r);
    });
  }
  // The candidates table's "vs eager" fills in as each accepted candidate's timing arrives.
  function speedupCell(p) {
    const row = document.querySelector('#candidates tr[data-turn="' + p.turn + '"]');
    if (!agent || !row || row.cells.length < 4) return;
    row.cells[2].textContent = fmt(p.speedup_vs_eager, 2) + "x";
  }
  function candidateRow(p) {
    const table = document.getElementById("candidates");
    if (!table || table.querySelector('tr[data-turn="' + p.turn + '"]')) return;
    const r = el("tr"); r.dataset.turn = p.turn;
    r.appendChild(el("td", String(p.turn))); r.appendChild(el("td", p.status));
    if (agent) r.appendChild(el("td", ""));
    const links = r.appendChild(el("td"));
    const view = links.appendChild(el("a", "view")); view.href = root.dataset.candidateUrl.replace(/\/0\/$/, "/" + p.turn + "/");
    links.appendChild(document.createTextNode(" · "));
    const diff = links.appendChild(el("a", "diff")); diff.href = root.dataset.diffUrl + "?a=reference&b=" + p.turn;
    table.appendChild(r);
  }
  // Once the run is over, the server's panels (profile, roofline, the best verdict) replace the live ones.
  function refreshPanels() {
    fetch(location.pathname, {credentials: "same-origin"}).then((r) => r.text()).then((html) => {
      const page = new DOMParser().parseFromString(html, "text/html");
      ["verdict-panel", "profile-panel"].forEach((id) => {
        const fresh = page.getElementById(id), old = document.getElementById(id);
        if (fresh && old) old.replaceWith(document.importNode(fresh, true));
      });
      const rows = page.getElementById("candidates"), table = document.getElementById("candidates");
      if (rows && table) table.replaceWith(document.importNode(rows, true));
      if (window.studioRoofline) window.studioRoofline.draw();
      root.dataset.panels = "final";
    });
  }

  // Agent runs: the conversation as it happens (streamed text, tool calls, their results) and a
  // chart of each evaluation's speedup over eager PyTorch, with the best so far.
  const agent = document.getElementById("conversation") ? makeAgentView() : null;

  function makeAgentView() {
    const convo = document.getElementById("conversation");
    const tokens = document.getElementById("tokens-used");
    const streams = {};  // turn -> {attempt, node}
    const points = {labels: [], speedup: [], compile: [], best: [], colors: []};
    let bestSoFar = null;
    const accepted = {};  // candidate number -> accepted (its timing event follows its verification)
    const canvas = document.getElementById("speedup-chart");
    const chart = window.Chart ? new window.Chart(canvas, {
      type: "line",
      data: {labels: points.labels, datasets: [
        // Lower order is drawn on top: every candidate's point stays visible above the best-so-far line.
        {label: "speedup vs eager (0 = not accepted)", data: points.speedup, showLine: false, pointRadius: 5, pointBackgroundColor: points.colors, borderColor: points.colors, order: 0},
        {label: "speedup vs torch.compile", data: points.compile, showLine: false, pointRadius: 5, pointStyle: "triangle", pointBackgroundColor: "#8250df", borderColor: "#8250df", order: 1},
        {label: "best so far (vs eager)", data: points.best, stepped: true, pointRadius: 0, pointHoverRadius: 0, borderColor: "#1a7f37", borderWidth: 2, borderDash: [6, 4], order: 2}]},
      options: {animation: false, maintainAspectRatio: false, scales: {y: {beginAtZero: true, title: {display: true, text: "speedup (x)"}}}},
    }) : null;

    function box(cls, title) {
      const d = el("div", undefined, "msg " + cls);
      if (title) d.appendChild(el("div", title, "msg-title"));
      convo.appendChild(d);
      return d;
    }
    function stream(turn, attempt) {
      let s = streams[turn];
      if (!s || s.attempt !== attempt) {  // a retried turn restarts its text
        if (s) s.node.remove();
        const d = box("assistant streaming", "turn " + (turn + 1) + " · model (writing…)");
        s = streams[turn] = {attempt: attempt, node: d, text: d.appendChild(el("pre", "", "text"))};
      }
      return s;
    }
    // Turns count from 1 on this page, as candidates do: "turn 2 · #3" is candidate 3, written in turn 2.
    function pointLabel(p) { return "turn " + (p.agent_turn + 1) + " · #" + p.turn; }
    function addPoint(label, speedup, accepted, vsCompile) {
      if (accepted && speedup !== null && speedup !== undefined && (bestSoFar === null || speedup > bestSoFar)) bestSoFar = speedup;
      points.labels.push(label); points.speedup.push(accepted ? speedup : 0); points.best.push(bestSoFar);
      // null leaves a gap: torch.compile was not timed (or the candidate was rejected), not "0x".
      points.compile.push(accepted && vsCompile ? vsCompile : null);
      points.colors.push(accepted ? "#0969da" : "#8c959f");
      if (chart) chart.update();
      canvas.dataset.points = String(points.labels.length);
      canvas.dataset.compilePoints = String(points.compile.filter((x) => x !== null).length);
    }
    return {render: function (ev) {
      const p = ev.payload || {};
      if (ev.kind === "agent_started" && p.knowledge) box("knowledge", "from the knowledge base").appendChild(el("pre", p.knowledge));
      if (ev.kind === "token") stream(p.turn, p.attempt).text.textContent += p.text;
      if (ev.kind === "assistant") {
        const s = streams[p.turn];
        if (s) s.node.remove();
        const d = box("assistant", "turn " + (p.turn + 1) + " · model" + (tokens ? " (" + p.completion_tokens + " tokens)" : ""));
        d.dataset.turn = p.turn;
        if (p.text) {
          const why = d.appendChild(el("details", undefined, "reasoning")); why.open = true;
          why.appendChild(el("summary", "reasoning (" + p.text.length + " characters)"));
          why.appendChild(el("pre", p.text, "text"));
        }
        (p.tool_calls || []).forEach((c) => {
          const det = el("details", undefined, "tool-call"); det.id = "call-" + c.id;
          det.appendChild(el("summary", "→ " + c.name));
          let args = c.arguments;
          try { const parsed = JSON.parse(args); args = parsed.source || JSON.stringify(parsed, null, 2); } catch (e) { /* malformed: shown as sent */ }
          det.appendChild(el("pre", args));
          d.appendChild(det);
        });
        streams[p.turn] = {attempt: -1, node: d};
        if (tokens) tokens.textContent = p.total_tokens;
      }
      if (ev.kind === "observation") box("observation", "turn " + (p.turn + 1) + " · studio").appendChild(el("pre", p.text));
      if (ev.kind === "tool_result") {
        const d = box("tool" + (p.error ? " bad" : ""));
        const det = d.appendChild(el("details", undefined, "tool-result")); det.open = true;
        det.appendChild(el("summary", "turn " + (p.turn + 1) + " · " + p.tool + (p.error ? " (error)" : "") + " · result"));
        det.appendChild(el("pre", p.content));
      }
      if (ev.kind === "verification" && p.agent_turn !== undefined) {
        accepted[p.turn] = p.status === "accepted";
        if (!accepted[p.turn]) addPoint(pointLabel(p), 0, false);
      }
      if (ev.kind === "timing" && p.agent_turn !== undefined && accepted[p.turn]) addPoint(pointLabel(p), p.speedup_vs_eager, true, p.speedup_vs_compile);
    }};
  }

  function fold(open) { document.querySelectorAll("#conversation details").forEach((d) => { d.open = open; }); }
  const expand = document.getElementById("expand-all"), collapse = document.getElementById("collapse-all");
  if (expand) expand.addEventListener("click", () => fold(true));
  if (collapse) collapse.addEventListener("click", () => fold(false));
  if (agent && window.studio) {
    window.studio.shortcut("Alt+E", "run page: expand the whole conversation", () => fold(true));
    window.studio.shortcut("Alt+C", "run page: collapse the whole conversation", () => fold(false));
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
