// The extension's entry point: the bundle that `npm run build` makes from src/extension.js
// (vsce runs it before packaging, as `vscode:prepublish`), so the package holds one script, not node_modules.
"use strict";
module.exports = require("./dist/extension.js");
