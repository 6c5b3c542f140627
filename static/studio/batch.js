// The batch page: while the batch runs, its progress and problem table are fetched again every few seconds.
(function () {
  const root = document.getElementById("batch");
  if (!root || root.dataset.status !== "running") return;
  function refresh() {
    fetch(location.pathname, {credentials: "same-origin"}).then((r) => r.text()).then((html) => {
      const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("batch");
      if (!fresh) return;
      root.replaceChildren(...Array.from(fresh.childNodes).map((n) => document.importNode(n, true)));
      root.dataset.status = fresh.dataset.status;
      if (fresh.dataset.status === "running") setTimeout(refresh, 3000);
    }).catch(() => setTimeout(refresh, 10000));
  }
  setTimeout(refresh, 3000);
})();
