"""`pocketmcp init`: the MCP client configurations (Claude Desktop, Cursor, VS Code, Claude
Code) that start this server on a folder, merged into the clients' own JSON files.

A file is merged, never replaced: other servers and settings stay, and so do its comments,
trailing commas and layout (editors write JSON with comments: `jsonc.py` changes the one
member in place); the previous file is kept as FILE.bak, and a file that is not valid JSON
(with comments) is refused and left as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pocketmcp.commands import jsonc
from pocketmcp.errors import PocketError

CLIENTS = ("claude-desktop", "cursor", "vscode", "claude-code")


@dataclass(frozen=True)
class Client:
    name: str
    title: str
    path: Path  # its configuration file
    key: str  # where servers are listed in it: "mcpServers" or "servers" (VS Code)


def _user_config_dir(home: Path) -> Path:
    """The per-user configuration folder of desktop apps on this system (the default one:
    `--config-file` names another)."""
    if sys.platform == "darwin":
        return home / "Library" / "Application Support"
    if sys.platform == "win32":
        return home / "AppData" / "Roaming"
    return home / ".config"


def clients(home: Path | None = None) -> dict[str, Client]:
    """Each client with the user-wide configuration file it reads."""
    home = home or Path.home()
    apps = _user_config_dir(home)
    return {
        "claude-desktop": Client("claude-desktop", "Claude Desktop",
                                 apps / "Claude" / "claude_desktop_config.json", "mcpServers"),
        "cursor": Client("cursor", "Cursor", home / ".cursor" / "mcp.json", "mcpServers"),
        "vscode": Client("vscode", "VS Code", apps / "Code" / "User" / "mcp.json", "servers"),
        "claude-code": Client("claude-code", "Claude Code", home / ".claude.json",
                              "mcpServers"),
    }


def chosen_clients(args: argparse.Namespace) -> list[Client]:
    """The clients `--client` names (all of them by default), one with the file
    `--config-file` names instead of its usual one."""
    known = clients()
    names = args.client or list(CLIENTS)
    if args.config_file:
        if len(names) != 1:
            raise PocketError("--config-file names one file: give one --client with it")
        base = known[names[0]]
        return [Client(base.name, base.title, Path(args.config_file), base.key)]
    return [known[n] for n in names]


def command() -> list[str]:
    """How a client starts this PocketMCP: its `pocketmcp` script, by absolute path."""
    script = Path(sys.argv[0])
    if script.name == "pocketmcp" and script.exists():
        return [str(script.absolute())]
    found = shutil.which("pocketmcp")
    if found:
        return [str(Path(found).absolute())]
    return [sys.executable, "-m", "pocketmcp"]


def ephemeral(command: list[str]) -> bool:
    """Whether `command` runs from uv's cache (`uvx`): gone once the cache is cleaned."""
    parts = Path(command[0]).parts
    return any(part.startswith("archive-v") for part in parts) and any(
        part in ("uv", ".uv") or "uv" in part.split("-") for part in parts)


def entry(client: Client, folder: Path, index: Path, title: str) -> dict[str, Any]:
    """The server entry for `client`: absolute paths, settings in `env`."""
    exe, *args = command()
    server: dict[str, Any] = {"command": exe}
    if args:
        server["args"] = args
    if title != "pocketmcp":
        server["args"] = [*server.get("args", []), "--title", title]
    server["env"] = {"WATCH_DIR": str(folder), "SQLITE_PATH": str(index)}
    if client.key == "servers":  # VS Code names the transport
        server = {"type": "stdio", **server}
    return server


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise PocketError(f"cannot read {path}: {exc.strerror}") from exc


def read_config(path: Path) -> dict[str, Any]:
    """A client's configuration file as a JSON object ({} when missing); comments and
    trailing commas are allowed; PocketError when it is not valid or not an object."""
    return _parse(path, _read_text(path))


def _parse(path: Path, text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        data = jsonc.loads(text)
    except json.JSONDecodeError as exc:
        raise PocketError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
            "nothing was written: fix the file or use `pocketmcp init --print` and paste the "
            "entry yourself") from None
    if not isinstance(data, dict):
        raise PocketError(f"{path} holds JSON but not an object ({{...}}); nothing was "
                          "written: use `pocketmcp init --print` and add the entry yourself")
    return data


def merge(client: Client, name: str, server: dict[str, Any]) -> tuple[str, Path | None]:
    """Put `server` under `name` in the client's file, keeping everything else; ("added",
    "replaced" or "unchanged" (the same entry is there: nothing written), the backup of the
    previous file or None when there was none)."""
    text = _read_text(client.path)
    data = _parse(client.path, text)
    servers = data.get(client.key)
    if servers is None:
        servers = data[client.key] = {}
    if not isinstance(servers, dict):
        raise PocketError(f"{client.path}: {client.key!r} is not an object; nothing was "
                          "written")
    if servers.get(name) == server:
        return "unchanged", None  # nothing written: the file stays as it is
    how = "replaced" if name in servers else "added"
    servers[name] = server
    new_text = _edited(client.path, text, (client.key, name), server, data)
    backup = None
    try:
        client.path.parent.mkdir(parents=True, exist_ok=True)
        if client.path.exists():
            backup = client.path.with_name(client.path.name + ".bak")
            shutil.copy2(client.path, backup)
        tmp = client.path.with_name(f".{client.path.name}.{secrets.token_hex(4)}")
        tmp.write_text(new_text, encoding="utf-8")
        os.replace(tmp, client.path)
    except OSError as exc:
        raise PocketError(f"cannot write {client.path}: {exc.strerror}") from exc
    return how, backup


def _edited(path: Path, text: str, member: tuple[str, str], server: dict[str, Any],
            data: dict[str, Any]) -> str:
    """The file's new text: the one member changed in place when the file has content (its
    comments and layout kept), checked to read back as `data`."""
    if not text.strip():
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    new_text = jsonc.set_member(text, member, server)
    if jsonc.loads(new_text) != data:  # never write what does not read back as intended
        raise PocketError(f"{path}: could not add the entry in place; nothing was written: "
                          "use `pocketmcp init --print` and paste it yourself")
    return new_text


def snippet(client: Client, name: str, server: dict[str, Any]) -> str:
    """What to paste into the client's file (or, for Claude Code, the command to run)."""
    if client.name == "claude-code":
        env = " ".join(f"--env {k}={v}" for k, v in server.get("env", {}).items())
        args = " ".join(server.get("args", []))
        return f"claude mcp add {name} {env} -- {server['command']} {args}".rstrip()
    return json.dumps({client.key: {name: server}}, indent=2, ensure_ascii=False)
