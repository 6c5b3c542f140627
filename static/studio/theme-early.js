// Loaded in <head>, before the page paints: the saved theme (or the system's preference) from the start,
// so a dark-theme user never sees a white flash. studio.js does the rest.
(function () {
  let saved = null;
  try { saved = localStorage.getItem("kstudio-theme"); } catch (e) { /* storage blocked */ }
  const dark = saved ? saved === "dark" : window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  document.documentElement.dataset.theme = dark ? "dark" : "light";
})();
