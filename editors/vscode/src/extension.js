// The hpdsl VS Code extension: starts `hpdsl lsp` (or the configured command) for .hpf files.
// Bundled by esbuild into dist/extension.js (package.json "build"); extension.js loads the bundle.
"use strict";
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const [command, ...args] = vscode.workspace.getConfiguration("hpdsl").get("server.command");
  const server = { command, args };
  client = new LanguageClient("hpdsl", "hpdsl language server",
    { run: server, debug: server },
    {
      documentSelector: [{ scheme: "file", language: "hpdsl" }],
      // .hpf files changed on disk (a git checkout, another editor) re-check the open files that import them
      synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher("**/*.hpf") },
    });
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
