-- Neovim (0.7+): `hpdsl lsp` for every hpdsl buffer, one client per project root, with the built-in LSP client.
-- Load it from your init.lua (`dofile("/path/to/hpdsl/editors/nvim/hpdsl.lua")`), or copy it there.
-- The filetype is `hpdsl`, as in the recipe of editors/README.md. The server command is
-- `vim.g.hpdsl_server_cmd` when set (a list, e.g. { "/path/to/.venv/bin/hpdsl", "lsp" }), else the hpdsl on PATH.
vim.cmd([[autocmd BufRead,BufNewFile *.hpf setfiletype hpdsl]])

local markers = { ".git", "pyproject.toml" }
local clients = {} -- root folder -> client id, for Neovim 0.7 (which has no vim.lsp.start)

-- The project root of a buffer: the nearest folder above it holding a marker, else the file's own folder.
local function root_of(bufnr)
  local folder = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(bufnr), ":p:h")
  local best = nil
  for _, marker in ipairs(markers) do
    local found = vim.fn.finddir(marker, folder .. ";")
    if found == "" then
      found = vim.fn.findfile(marker, folder .. ";")
    end
    if found ~= "" then
      local root = vim.fn.fnamemodify(vim.fn.fnamemodify(found, ":p"):gsub("/$", ""), ":h")
      if best == nil or #root > #best then
        best = root
      end
    end
  end
  return best or folder
end

local function attach(args)
  local root = root_of(args.buf)
  local config = { name = "hpdsl", cmd = vim.g.hpdsl_server_cmd or { "hpdsl", "lsp" }, root_dir = root }
  if vim.lsp.start then
    -- 0.8+: reuses the running client of the same name and root_dir
    vim.lsp.start(config, { bufnr = args.buf })
    return
  end
  local id = clients[root]
  if id == nil or vim.lsp.get_client_by_id(id) == nil then
    id = vim.lsp.start_client(config)
    clients[root] = id
  end
  if id then
    vim.lsp.buf_attach_client(args.buf, id)
  end
end

vim.api.nvim_create_autocmd("FileType", { pattern = "hpdsl", callback = attach })
vim.diagnostic.config({ virtual_text = true, signs = true })
