// The roofline chart of the profile panel (data from the server's agent/engine/roofline.py placement). Log-log
// FLOP/s against arithmetic intensity where FLOPs were counted; otherwise achieved bandwidth against the
// memory roof. Nothing is drawn for a roof that was not measured or known.
(function () {
  let chart = null;
  function css(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }
  // Log axes: label the powers of ten only, with SI prefixes (10 G rather than 10,000,000,000).
  function si(v) {
    if (!Number.isInteger(Math.round(Math.log10(v) * 1e6) / 1e6)) return "";
    const prefixes = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (const [scale, p] of prefixes) if (v >= scale) return (v / scale) + " " + p;
    return String(v);
  }
  function draw() {
    const data = document.getElementById("roofline-data");
    const canvas = document.getElementById("roofline-chart");
    if (chart) { chart.destroy(); chart = null; }
    if (!data || !canvas || !window.Chart) return;
    const r = JSON.parse(data.textContent);
    const fg = css("--fg"), bad = css("--bad"), link = css("--link");
    if (r.intensity && r.compute_roof) {
      const bw = r.memory_roof.value, peak = r.compute_roof.value, ridge = peak / bw;
      const lo = Math.min(r.intensity, ridge) / 100, hi = Math.max(r.intensity, ridge) * 100;
      chart = new window.Chart(canvas, {type: "scatter", data: {datasets: [
        {label: "roof (memory, then compute)", data: [{x: lo, y: bw * lo}, {x: ridge, y: peak}, {x: hi, y: peak}], showLine: true, pointRadius: 0, borderColor: link},
        {label: "this kernel", data: [{x: r.intensity, y: r.achieved_flops_per_s}], pointRadius: 7, backgroundColor: bad}]},
        options: {animation: false, maintainAspectRatio: false, plugins: {legend: {labels: {color: fg}}},
          scales: {x: {type: "logarithmic", title: {display: true, text: "FLOP per byte", color: fg}, ticks: {color: fg, callback: si}},
                   y: {type: "logarithmic", title: {display: true, text: "FLOP/s", color: fg}, ticks: {color: fg, callback: si}}}}});
    } else {
      chart = new window.Chart(canvas, {type: "bar", data: {labels: ["achieved bandwidth", "memory roof"], datasets: [
        {label: "bytes per second", data: [r.achieved_bytes_per_s || 0, r.memory_roof.value], backgroundColor: [bad, link]}]},
        options: {animation: false, maintainAspectRatio: false, indexAxis: "y", plugins: {legend: {display: false}},
          scales: {x: {type: "logarithmic", title: {display: true, text: "bytes per second", color: fg}, ticks: {color: fg, callback: si}}, y: {ticks: {color: fg}}}}});
    }
    canvas.dataset.drawn = "true";
  }
  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("studio:theme", draw);
  window.studioRoofline = {draw: draw};
})();
