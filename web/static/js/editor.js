// Turns the plain code <textarea>s into CodeMirror editors with Python highlighting.
// The form posts the textarea as before: CodeMirror copies its text back on submit.
(function () {
  "use strict";
  if (!window.CodeMirror) return;
  var areas = document.querySelectorAll("textarea.code-input");
  // Tab indents, as in any code editor; Esc first lets Tab and Shift-Tab move the focus on,
  // so a keyboard user is never trapped in the editor (WCAG 2.1.2). The page says so.
  function tab(cm) { cm.replaceSelection("    "); }
  function shiftTab(cm) { cm.execCommand("indentLess"); }
  for (var i = 0; i < areas.length; i++) {
    var area = areas[i];
    var editor = CodeMirror.fromTextArea(area, {
      mode: "python", lineNumbers: true, indentUnit: 4, tabSize: 4,
      indentWithTabs: false, viewportMargin: Infinity, lineWrapping: true,
      // no blinking cursor for a reader who asks for less motion
      cursorBlinkRate: window.matchMedia && matchMedia("(prefers-reduced-motion: reduce)").matches ? 0 : 530,
      extraKeys: {Tab: tab, "Shift-Tab": shiftTab,
                  Esc: function (cm) { cm.state.leaveOnTab = true; }}
    });
    editor.on("keydown", function (cm, event) {
      if (event.key === "Tab" && cm.state.leaveOnTab) {
        event.codemirrorIgnore = true;  // the browser's own Tab: the focus moves on
        return;
      }
      if (event.key !== "Escape" && event.key !== "Shift") cm.state.leaveOnTab = false;
    });
    editor.on("focus", function (cm) { cm.state.leaveOnTab = false; });
    editor.getWrapperElement().setAttribute("data-editor-for", area.id);
    // the field a screen reader announces is CodeMirror's own textarea: give it the label
    var input = editor.getInputField();
    var label = area.id && document.querySelector("label[for='" + area.id + "']");
    if (label) {
      if (!label.id) label.id = area.id + "-label";
      input.setAttribute("aria-labelledby", label.id);
    } else {
      input.setAttribute("aria-label", area.getAttribute("aria-label") || "code");
    }
    input.setAttribute("aria-multiline", "true");
    if (area.dataset.keysHint) {
      var hint = document.createElement("small");
      hint.className = "hint editor-keys";
      hint.id = (area.id || "editor" + i) + "-keys";
      hint.textContent = area.dataset.keysHint;
      editor.getWrapperElement().insertAdjacentElement("afterend", hint);
      input.setAttribute("aria-describedby", hint.id);
    }
  }

  // A file over the server's limit would be refused with the editor's text lost: say the
  // limit before sending, and keep everything on the page.
  var form = document.getElementById("submit-form");
  if (!form || !form.dataset.maxBytes) return;
  var limit = parseInt(form.dataset.maxBytes, 10);
  form.addEventListener("submit", function (event) {
    var file = form.querySelector("input[type=file]");
    var code = form.querySelector("textarea.code-input");
    var size = file && file.files.length ? file.files[0].size
      : new Blob([code ? code.value : ""]).size;
    var note = document.getElementById("size-error");
    if (size > limit) {
      event.preventDefault();
      note.textContent = form.dataset.tooLarge.replace("{size}", size);
      note.hidden = false;
    } else if (note) {
      note.hidden = true;
    }
  });
})();
