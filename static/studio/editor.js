// Monaco over a form's textarea (upload and "evaluate my kernel"): Python highlighting, the static
// validation errors as markers, Ctrl+Enter submits, Ctrl+S keeps a draft in this browser. Without Monaco
// the plain textarea still works.
(function () {
  const holder = document.querySelector("[data-editor-for]");
  if (!holder) return;
  const textarea = document.getElementById(holder.dataset.editorFor);
  const form = textarea.form;
  const issues = JSON.parse(document.getElementById("issues-data").textContent || "[]");
  const draftKey = "kstudio-draft:" + location.pathname;
  const status = document.getElementById("editor-status");

  function say(text) { if (status) status.textContent = text; }
  function jumpTo(line, col) {
    if (window.studioEditor) { window.studioEditor.revealLineInCenter(line); window.studioEditor.setPosition({lineNumber: line, column: col}); window.studioEditor.focus(); }
    else { textarea.focus(); }
  }
  document.querySelectorAll("#issues a[data-line]").forEach((a) => a.addEventListener("click", (e) => {
    e.preventDefault(); jumpTo(+a.dataset.line, +a.dataset.col || 1);
  }));

  function submit() { if (form) { textarea.value = window.studioEditor ? window.studioEditor.getValue() : textarea.value; form.requestSubmit(); } }
  function saveDraft() {
    try { localStorage.setItem(draftKey, window.studioEditor ? window.studioEditor.getValue() : textarea.value); say("Draft saved in this browser."); }
    catch (e) { say("This browser does not allow saving a draft."); }
  }
  function restoreDraft() {
    const draft = localStorage.getItem(draftKey);
    if (!draft) { say("No saved draft."); return; }
    if (window.studioEditor) window.studioEditor.setValue(draft); else textarea.value = draft;
    say("Draft restored.");
  }
  window.studio.shortcut("Ctrl+Enter", "submit the form (upload / start the run)", submit);
  window.studio.shortcut("Ctrl+S", "save the editor's text as a draft in this browser", saveDraft);
  window.studio.shortcut("Ctrl+Shift+O", "restore the saved draft", restoreDraft);
  const restore = document.getElementById("restore-draft");
  if (restore) restore.addEventListener("click", restoreDraft);

  window.studio.loadMonaco().then(function (monaco) {
    const editor = monaco.editor.create(holder, { value: textarea.value, language: "python", automaticLayout: true,
                                                 minimap: { enabled: false }, fontSize: 13, theme: window.studio.monacoTheme() });
    window.studioEditor = editor;
    holder.classList.add("ready");
    textarea.style.display = "none";
    editor.onDidChangeModelContent(() => { textarea.value = editor.getValue(); });
    // Monaco's own bindings too, so the keys work while it has focus whatever the browser does first.
    editor.addCommand(monaco.KeyMod.CtrlCmd | monaco.KeyCode.Enter, submit);
    editor.addCommand(monaco.KeyMod.CtrlCmd | monaco.KeyCode.KeyS, saveDraft);
    // Static validation errors as markers next to the code (lines and columns are 1-based, as Monaco's).
    monaco.editor.setModelMarkers(editor.getModel(), "validation", issues.filter((i) => i.line).map((i) => ({
      severity: i.severity === "error" ? monaco.MarkerSeverity.Error : monaco.MarkerSeverity.Warning,
      message: i.message, startLineNumber: i.line, startColumn: i.col || 1, endLineNumber: i.line,
      endColumn: (i.col || 1) + 1 })));
    holder.dataset.markers = String(issues.filter((i) => i.line).length);
    const first = issues.find((i) => i.line);
    if (first) editor.revealLineInCenter(first.line);
  }).catch(function (err) { say(err.message + "; the plain text box works."); });
})();
