// Read-only Monaco views: a candidate's or kernel's source (with build errors as markers on their lines)
// and the diff editor between two sources. The <pre> fallbacks stay until Monaco is up.
(function () {
  function text(id) { const node = document.getElementById(id); return node ? JSON.parse(node.textContent) : null; }
  const views = document.querySelectorAll(".code-view[data-source]");
  const diffs = document.querySelectorAll(".diff-view[data-original]");
  if (!views.length && !diffs.length) return;

  window.studio.loadMonaco().then(function (monaco) {
    views.forEach(function (holder) {
      const editor = monaco.editor.create(holder, {value: text(holder.dataset.source), language: holder.dataset.language || "python",
        // Monaco draws markers only in editable editors unless told otherwise.
        readOnly: true, renderValidationDecorations: "on", automaticLayout: true, minimap: {enabled: false}, fontSize: 13,
        theme: window.studio.monacoTheme()});
      const markers = (text(holder.dataset.markers || "") || []).map(function (m) {
        return {severity: m.severity === "warning" ? monaco.MarkerSeverity.Warning : monaco.MarkerSeverity.Error,
                message: m.message + " (" + m.reported_at + (m.placed ? "" : ", line not found in the module") + ")",
                startLineNumber: m.line, startColumn: m.col, endLineNumber: m.line, endColumn: m.col + 1};
      });
      monaco.editor.setModelMarkers(editor.getModel(), "build", markers);
      holder.dataset.markers = String(markers.length);
      holder.classList.add("ready");
      if (markers.length) editor.revealLineInCenter(markers[0].startLineNumber);
      const fallback = document.getElementById(holder.id + "-fallback");
      if (fallback) fallback.hidden = true;
      document.querySelectorAll("a[data-goto-line]").forEach(function (a) {
        a.addEventListener("click", function (e) { e.preventDefault(); editor.revealLineInCenter(+a.dataset.gotoLine);
          editor.setPosition({lineNumber: +a.dataset.gotoLine, column: 1}); editor.focus(); });
      });
      window.studioViewer = editor;
    });
    diffs.forEach(function (holder) {
      const diff = monaco.editor.createDiffEditor(holder, {readOnly: true, automaticLayout: true, renderSideBySide: holder.dataset.inline !== "true",
        minimap: {enabled: false}, fontSize: 13, theme: window.studio.monacoTheme()});
      diff.setModel({original: monaco.editor.createModel(text(holder.dataset.original), "python"),
                     modified: monaco.editor.createModel(text(holder.dataset.modified), "python")});
      diff.onDidUpdateDiff(function () {
        const changes = diff.getLineChanges() || [];
        holder.dataset.changes = String(changes.length);
        holder.classList.add("ready");
        const count = document.getElementById("diff-count");
        if (count) count.textContent = changes.length + " changed region" + (changes.length === 1 ? "" : "s");
      });
      let side = holder.dataset.inline !== "true";
      window.studio.shortcut("Alt+I", "diff: switch between side by side and inline", function () {
        side = !side; diff.updateOptions({renderSideBySide: side});
      });
      window.studio.shortcut("Alt+N", "diff: go to the next change", function () {
        diff.goToDiff ? diff.goToDiff("next") : diff.getModifiedEditor().trigger("keys", "editor.action.diffReview.next", null);
      });
      window.studioDiff = diff;
    });
  }).catch(function (err) {
    document.querySelectorAll(".code-view, .diff-view").forEach(function (h) { h.textContent = err.message; });
  });
})();
