// The kernel library's table: sort by any column (numbers as numbers), filter by text, backend, hardware
// and a minimum speedup. All client-side: the page already holds every kernel the user may see.
(function () {
  const table = document.getElementById("kernels");
  if (!table) return;
  const body = table.tBodies[0];
  const rows = Array.from(body.querySelectorAll("tr:not(.empty)"));
  const search = document.getElementById("kernel-search");
  const backend = document.getElementById("filter-backend");
  const hardware = document.getElementById("filter-hardware");
  const speedup = document.getElementById("filter-speedup");
  const count = document.getElementById("kernel-count");

  function filter() {
    const q = search.value.trim().toLowerCase(), min = parseFloat(speedup.value);
    let shown = 0;
    rows.forEach(function (r) {
      const ok = (!q || r.textContent.toLowerCase().includes(q)) && (!backend.value || r.dataset.backend === backend.value)
        && (!hardware.value || r.dataset.hardware === hardware.value) && (isNaN(min) || parseFloat(r.dataset.speedup) >= min);
      r.hidden = !ok; if (ok) shown += 1;
    });
    count.textContent = shown + " of " + rows.length + " kernels";
    table.dataset.shown = String(shown);
  }
  [search, backend, hardware, speedup].forEach(function (c) { c.addEventListener("input", filter); });

  table.querySelectorAll("th.sortable").forEach(function (th, column) {
    th.addEventListener("click", function () {
      const asc = !th.classList.contains("sorted-asc");
      table.querySelectorAll("th.sortable").forEach(function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
      th.classList.add(asc ? "sorted-asc" : "sorted-desc");
      const number = th.dataset.type === "number";
      function key(r) {
        const cell = r.cells[column], raw = cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent.trim();
        if (!number) return raw.toLowerCase();
        const x = parseFloat(raw); return isNaN(x) ? -Infinity : x;  // untimed sorts last when descending
      }
      rows.sort(function (a, b) { const ka = key(a), kb = key(b); return (ka < kb ? -1 : ka > kb ? 1 : 0) * (asc ? 1 : -1); });
      rows.forEach(function (r) { body.appendChild(r); });
      table.dataset.sortedBy = String(column) + (asc ? "-asc" : "-desc");
    });
  });
  if (window.studio) window.studio.shortcut("/", "library: focus the search box", function () { search.focus(); });
})();
