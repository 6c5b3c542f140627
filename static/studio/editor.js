// Monaco over a form's textarea (upload and "evaluate my kernel"): Python highlighting, the static
// validation errors as markers, Ctrl+Enter submits, Ctrl+S keeps a draft in this browser. Without Monaco
// the plain textarea still works.
(function () {
  const holder = document.querySelector("[data-editor-for]");
  if (!holder) return;
  const textarea = document.getElementById(holder.dataset.editorFor);
  const form = textarea.form;
  // A list of {line, col, message, severity}; anything else (a page that passed no issues) means none.
  const parsed = JSON.parse((document.getElementById("issues-data") || {}).textContent || "[]");
  const issues = Array.isArray(parsed) ? parsed : [];
  const draftKey = "kstudio-draft:" + location.pathname;
  const status = document.getElementById("editor-status");

  function say(text) { if (status) status.textContent = text; }
  function jumpTo(line, col) {
    // The editor itself comes into view, then the line in its middle.
    holder.scrollIntoView({ block: "nearest", behavior: "auto" });
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

  // A chosen file is read into the editor at once, so it can be edited (sizes, names) before it is sent; the
  // file field is then cleared so the form posts the edited text. A file that is not UTF-8 text stays a file:
  // the server says what is wrong with it.
  const fileInput = form ? form.querySelector("input[type=file][name=file]") : null;
  const nameInput = form ? form.querySelector("input[name=name]") : null;
  function setText(text) { if (window.studioEditor) window.studioEditor.setValue(text); textarea.value = text; }
  if (fileInput) fileInput.addEventListener("change", function () {
    const file = fileInput.files && fileInput.files[0];
    if (!file) return;
    file.text().then(function (text) {
      if (text.indexOf("\uFFFD") !== -1) { say(file.name + " is not UTF-8 text; it will be sent as a file."); return; }
      setText(text.replace(/^\uFEFF/, ""));
      if (nameInput && !nameInput.value) nameInput.value = file.name.replace(/\.py$/, "");
      fileInput.value = "";
      holder.dataset.loaded = file.name;
      say(file.name + " loaded into the editor: edit it, then submit.");
    }).catch(function () { say("The file could not be read here; it will be sent as it is."); });
  });

  // The upload's check runs the module once in the sandbox (up to a minute): say so while the page waits.
  if (form && form.id === "problem-form") form.addEventListener("submit", function () {
    const started = Date.now();
    const button = document.getElementById("upload-button");
    const tick = function () { say("Checking the module in the sandbox… " + Math.round((Date.now() - started) / 1000) + " s"); };
    tick();
    setInterval(tick, 1000);
    if (button) { button.disabled = true; button.textContent = "Checking…"; }
  });

  window.studio.loadMonaco().then(function (monaco) {
    const editor = monaco.editor.create(holder, { value: textarea.value, language: "python", automaticLayout: true,
                                                 minimap: { enabled: false }, fontSize: 13, theme: window.studio.monacoTheme(),
                                                 // Monaco's sticky scroll would cover the first lines shown, a marked line among them.
                                                 stickyScroll: { enabled: false } });
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

    // As you type: the same static check as on upload (AST only, on the server), a moment after the last key, its
    // issues as markers of their own ("as typed") on their lines.
    const form_ = holder.closest("form");
    const csrf = form_ ? (form_.querySelector("input[name=csrfmiddlewaretoken]") || {}).value : "";
    const field = (name) => { const f = form_ ? form_.querySelector("input[name=" + name + "]") : null; return f && f.value ? f.value : undefined; };
    let pending = null, asked = 0;
    function checkAsTyped() {
      const mine = ++asked;
      const body = { source: editor.getValue(), kind: holder.dataset.validateKind || "problem",
                     names: { model: field("model_name"), get_inputs: field("get_inputs_name"), get_init_inputs: field("get_init_inputs_name") } };
      if (holder.dataset.validateProblem) body.problem = Number(holder.dataset.validateProblem);
      fetch(holder.dataset.validateUrl, { method: "POST", credentials: "same-origin",
                                          headers: { "Content-Type": "application/json", "X-CSRFToken": csrf }, body: JSON.stringify(body) })
        .then((r) => r.ok ? r.json() : Promise.reject(new Error("the check answered " + r.status)))
        .then((found) => {
          if (mine !== asked) return;  // a later check is on its way
          const lined = (found.issues || []).filter((i) => i.line);
          monaco.editor.setModelMarkers(editor.getModel(), "validation", []);
          monaco.editor.setModelMarkers(editor.getModel(), "as-typed", lined.map((i) => ({
            severity: i.severity === "error" ? monaco.MarkerSeverity.Error : monaco.MarkerSeverity.Warning,
            message: i.message, startLineNumber: i.line, startColumn: i.col || 1, endLineNumber: i.line,
            endColumn: editor.getModel().getLineMaxColumn(Math.min(i.line, editor.getModel().getLineCount())) })));
          holder.dataset.liveMarkers = String(lined.length);
          holder.dataset.liveLines = lined.map((i) => i.line).join(",");
          const errors = (found.issues || []).filter((i) => i.severity === "error");
          say(errors.length ? errors.length + " problem" + (errors.length > 1 ? "s" : "") + " found as you type: " + errors[0].message
                            : "The static check finds nothing wrong (the sandbox check runs on submit).");
        })
        .catch((err) => say("The check as you type is unavailable (" + err.message + "); submitting still checks."));
    }
    if (holder.dataset.validateUrl) editor.onDidChangeModelContent(() => { clearTimeout(pending); pending = setTimeout(checkAsTyped, 600); });
  }).catch(function (err) { say(err.message + "; the plain text box works."); });
})();
