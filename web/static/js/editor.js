// Turns the plain code <textarea>s into CodeMirror editors with Python highlighting.
// The form posts the textarea as before: CodeMirror copies its text back on submit.
(function () {
  "use strict";
  if (!window.CodeMirror) return;
  var areas = document.querySelectorAll("textarea.code-input");
  for (var i = 0; i < areas.length; i++) {
    var editor = CodeMirror.fromTextArea(areas[i], {
      mode: "python", lineNumbers: true, indentUnit: 4, tabSize: 4,
      indentWithTabs: false, viewportMargin: Infinity,
      extraKeys: {Tab: function (cm) { cm.replaceSelection("    "); }}
    });
    editor.getWrapperElement().setAttribute("data-editor-for", areas[i].id);
  }
})();
