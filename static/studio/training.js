// A training run's page: polls its status JSON (apps/training/views.py) every 1.5 s until the run is over,
// and draws the loss and the reward of each logged step with Chart.js, one dataset per stage.
(function () {
  "use strict";
  const root = document.getElementById("training");
  if (!root) return;
  const statusUrl = root.dataset.statusUrl;
  const palette = ["#0969da", "#1a7f37", "#8250df", "#bf8700", "#b3261e"];
  const stageIndex = {};
  let after = 0;
  let position = 0;  // points are numbered across stages: each stage's own step counter starts again at 1

  function makeChart(id, yTitle) {
    const canvas = document.getElementById(id);
    const chart = window.Chart ? new window.Chart(canvas, {
      type: "scatter",
      data: {datasets: []},
      options: {animation: false, maintainAspectRatio: false, showLine: true,
                scales: {x: {ticks: {precision: 0}, title: {display: true, text: "logged step (all stages)"}}, y: {title: {display: true, text: yTitle}}}},
    }) : null;
    return {canvas: canvas, chart: chart, sets: {}, count: 0};
  }
  const charts = {loss: makeChart("loss-chart", "loss"), reward: makeChart("reward-chart", "mean reward")};

  function add(view, stage, x, y) {
    if (y === null || y === undefined) return;
    if (view.chart) {
      let set = view.sets[stage];
      if (!set) {
        if (!(stage in stageIndex)) stageIndex[stage] = Object.keys(stageIndex).length;
        const color = palette[stageIndex[stage] % palette.length];
        set = view.sets[stage] = {label: stage, data: [], borderColor: color, backgroundColor: color, pointRadius: 3};
        view.chart.data.datasets.push(set);
      }
      set.data.push({x: x, y: y});
    }
    view.count += 1;
  }

  function show(data) {
    document.getElementById("training-status").textContent = data.status;
    const log = document.getElementById("training-log");
    const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.textContent = data.log;
    if (atBottom) log.scrollTop = log.scrollHeight;
    if (data.data && data.data.problems !== undefined) {
      document.getElementById("training-data").textContent = "trajectories: " + data.data.trajectories + ", problems: " + data.data.problems;
    }
    const error = document.getElementById("training-error");
    error.textContent = data.error;
    error.hidden = !data.error;
    if (data.endpoint) {
      const holder = document.getElementById("training-endpoint");
      const link = holder.querySelector("a");
      link.href = data.endpoint.url;
      link.textContent = data.endpoint.name;
      holder.hidden = false;
    }
    for (const m of data.metrics) {
      position += 1;
      add(charts.loss, m.stage, position, m.loss);
      add(charts.reward, m.stage, position, m.reward);
      after = m.id;
    }
    for (const view of [charts.loss, charts.reward]) {
      if (view.chart) view.chart.update();
      view.canvas.dataset.points = String(view.count);
    }
    if (data.terminal) {
      const form = document.getElementById("cancel-form");
      if (form) form.remove();
      root.dataset.final = "true";
    }
  }

  function poll() {
    fetch(statusUrl + "?after=" + after, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then((data) => {
        show(data);
        if (!data.terminal || data.metrics.length) setTimeout(poll, 1500);  // after the end: one more, for the last rows
      })
      .catch(() => setTimeout(poll, 5000));  // the server restarting: try again, more slowly
  }
  poll();
})();
