// Turns the plain code <textarea>s into CodeMirror editors with Python highlighting.
// The form posts the textarea as before: CodeMirror copies its text back on submit.
(function () {
  "use strict";
  if (!window.CodeMirror) return;
  var areas = document.querySelectorAll("textarea.code-input");
  for (var i = 0; i < areas.length; i++) {
    var editor = CodeMirror.fromTextArea(areas[i], {
      mode: "python", lineNumbers: true, indentUnit: 4, tabSize: 4,
      indentWithTabs: false, viewportMargin: Infinity, lineWrapping: true,
      extraKeys: {Tab: function (cm) { cm.replaceSelection("    "); }}
    });
    editor.getWrapperElement().setAttribute("data-editor-for", areas[i].id);
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
