-- Neovim (0.7+): start `hpdsl lsp` for every .hpf buffer with the built-in LSP client.
-- Load it from your init.lua (`dofile("/path/to/hpdsl/editors/nvim/hpdsl.lua")`), or copy it there.
vim.cmd([[autocmd BufRead,BufNewFile *.hpf set filetype=hpf]])
vim.api.nvim_create_autocmd("FileType", {
  pattern = "hpf",
  callback = function(args)
    local client = vim.lsp.start_client({
      name = "hpdsl",
      cmd = { "hpdsl", "lsp" },  -- the hpdsl on PATH; use the venv's path if it is not
      root_dir = vim.fn.getcwd(),
    })
    if client then
      vim.lsp.buf_attach_client(args.buf, client)
    end
  end,
})
vim.diagnostic.config({ virtual_text = true, signs = true })
