// Shared by every page: the light/dark theme (CSS variables, Monaco's theme, kept in localStorage), the
// keyboard shortcuts with their help overlay, and loading Monaco from our own static files.
(function () {
  const KEY = "kstudio-theme";
  const root = document.documentElement;

  function theme() { return root.dataset.theme === "dark" ? "dark" : "light"; }
  function apply(name) {
    root.dataset.theme = name;
    try { localStorage.setItem(KEY, name); } catch (e) { /* private mode: the choice lasts this page */ }
    if (window.monaco) window.monaco.editor.setTheme(name === "dark" ? "vs-dark" : "vs");
    document.dispatchEvent(new CustomEvent("studio:theme", {detail: name}));
    const button = document.getElementById("theme-toggle");
    if (button) button.textContent = name === "dark" ? "Light theme" : "Dark theme";
  }
  function toggleTheme() { apply(theme() === "dark" ? "light" : "dark"); }

  // Monaco once per page, from static/vendor/monaco (copied from the npm package by `make assets`).
  const base = document.querySelector('link[rel="stylesheet"]').href.replace(/studio\/app\.css.*$/, "vendor/monaco/vs");
  let monacoPromise = null;
  function loadMonaco() {
    if (!monacoPromise) monacoPromise = new Promise(function (resolve, reject) {
      const loader = document.createElement("script");
      loader.src = base + "/loader.js";
      loader.onerror = function () { reject(new Error("Monaco is not installed (run make assets)")); };
      loader.onload = function () {
        window.require.config({ paths: { vs: base } });
        window.require(["vs/editor/editor.main"], function () {
          window.monaco.editor.setTheme(theme() === "dark" ? "vs-dark" : "vs");
          resolve(window.monaco);
        });
      };
      document.head.appendChild(loader);
    });
    return monacoPromise;
  }

  // Shortcuts. Page scripts register their own actions (submit, save) through studio.shortcut().
  const actions = {};
  function shortcut(keys, label, run) { actions[keys] = {label: label, run: run}; renderHelp(); }
  function keysOf(e) {
    const parts = [];
    if (e.ctrlKey || e.metaKey) parts.push("Ctrl");
    if (e.altKey) parts.push("Alt");
    const modified = e.ctrlKey || e.metaKey || e.altKey;
    if (e.shiftKey && (e.key.length > 1 || modified)) parts.push("Shift");
    // With a modifier, the physical key (Alt+T on a Mac types "†"); alone, the character ("?").
    const letter = modified && /^Key[A-Z]$/.test(e.code) ? e.code.slice(3) : null;
    parts.push(letter || (e.key === " " ? "Space" : e.key.length === 1 ? e.key.toUpperCase() : e.key));
    return parts.join("+");
  }
  function renderHelp() {
    const list = document.getElementById("shortcut-list");
    if (!list) return;
    list.innerHTML = "";
    Object.keys(actions).forEach(function (k) {
      const row = document.createElement("tr");
      const key = document.createElement("td"); key.appendChild(document.createElement("kbd")).textContent = k.replace("Ctrl", "Ctrl/⌘");
      const what = document.createElement("td"); what.textContent = actions[k].label;
      row.appendChild(key); row.appendChild(what); list.appendChild(row);
    });
  }
  function help(show) {
    const overlay = document.getElementById("shortcut-help");
    if (overlay) overlay.hidden = show === undefined ? !overlay.hidden : !show;
  }
  document.addEventListener("keydown", function (e) {
    const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(e.target.tagName) || e.target.isContentEditable;
    const keys = keysOf(e);
    if (keys === "Escape") { help(false); return; }
    if ((keys === "?" && !typing) || keys === "F1") { e.preventDefault(); help(); return; }
    const action = actions[keys];
    if (action && (!typing || keys.indexOf("Ctrl") === 0 || keys.indexOf("Alt") === 0)) { e.preventDefault(); action.run(e); }
  }, true);  // capture: before Monaco swallows Ctrl+S and Ctrl+Enter

  window.studio = {loadMonaco: loadMonaco, shortcut: shortcut, theme: theme, toggleTheme: toggleTheme, help: help,
                   monacoTheme: function () { return theme() === "dark" ? "vs-dark" : "vs"; }};

  document.addEventListener("DOMContentLoaded", function () {
    apply(theme());
    const button = document.getElementById("theme-toggle");
    if (button) button.addEventListener("click", toggleTheme);
    const helpButton = document.getElementById("help-toggle");
    if (helpButton) helpButton.addEventListener("click", function () { help(); });
    const close = document.getElementById("shortcut-close");
    if (close) close.addEventListener("click", function () { help(false); });
    shortcut("Alt+T", "switch between the light and dark theme", toggleTheme);
    shortcut("?", "show or hide this help (F1 in an editor)", function () { help(); });
    shortcut("Escape", "close this help", function () { help(false); });
  });
})();
