// Monaco over the form's textarea. Monaco is served from our own static files (static/vendor/monaco,
// copied from the npm package at build time); without it the plain textarea still works.
(function () {
  const holder = document.querySelector("[data-editor-for]");
  if (!holder) return;
  const textarea = document.getElementById(holder.dataset.editorFor);
  const issues = JSON.parse(document.getElementById("issues-data").textContent || "[]");
  const base = document.querySelector('link[rel="stylesheet"]').href.replace(/studio\/app\.css.*$/, "vendor/monaco/vs");

  function jumpTo(line, col) {
    if (window.studioEditor) { window.studioEditor.revealLineInCenter(line); window.studioEditor.setPosition({lineNumber: line, column: col}); window.studioEditor.focus(); }
    else { textarea.focus(); }
  }
  document.querySelectorAll("#issues a[data-line]").forEach((a) => a.addEventListener("click", (e) => {
    e.preventDefault(); jumpTo(+a.dataset.line, +a.dataset.col || 1);
  }));

  const loader = document.createElement("script");
  loader.src = base + "/loader.js";
  loader.onload = function () {
    window.require.config({ paths: { vs: base } });
    window.require(["vs/editor/editor.main"], function () {
      const editor = monaco.editor.create(holder, { value: textarea.value, language: "python", automaticLayout: true,
                                                   minimap: { enabled: false }, fontSize: 13 });
      window.studioEditor = editor;
      holder.classList.add("ready");
      textarea.style.display = "none";
      editor.onDidChangeModelContent(() => { textarea.value = editor.getValue(); });
      // Static validation errors as markers next to the code (lines and columns are 1-based, as Monaco's).
      monaco.editor.setModelMarkers(editor.getModel(), "validation", issues.filter((i) => i.line).map((i) => ({
        severity: i.severity === "error" ? monaco.MarkerSeverity.Error : monaco.MarkerSeverity.Warning,
        message: i.message, startLineNumber: i.line, startColumn: i.col || 1, endLineNumber: i.line,
        endColumn: (i.col || 1) + 1 })));
      const first = issues.find((i) => i.line);
      if (first) editor.revealLineInCenter(first.line);
    });
  };
  document.head.appendChild(loader);
})();
