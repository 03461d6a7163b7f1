"""The nginx baseline: a generated config in a temp dir, one process in the foreground.

`master_process off` keeps all the work in the one process we start, so its
CPU can be read from /proc like the others'. Request bodies stay in memory,
SSE is relayed unbuffered, upstream connections are kept alive.
"""

from __future__ import annotations

import shutil
from pathlib import Path

CONFIG = """\
worker_processes 1;
master_process off;
daemon off;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    client_max_body_size 64m;
    client_body_buffer_size 2m;
    keepalive_requests 1000000;
    upstream fake_provider {{
        server 127.0.0.1:{upstream_port};
        keepalive 128;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://fake_provider;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 60s;
        }}
    }}
}}
"""


def binary() -> str | None:
    """The nginx executable, or None when it is not installed."""
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)


def command(root: Path, port: int, upstream_port: int) -> list[str]:
    """Write the config under `root` and return the command that runs nginx in the foreground."""
    exe = binary()
    if exe is None:
        raise FileNotFoundError("nginx is not installed")
    root.mkdir(parents=True, exist_ok=True)
    conf = root / "nginx.conf"
    conf.write_text(CONFIG.format(root=root, port=port, upstream_port=upstream_port), encoding="utf-8")
    return [exe, "-p", str(root), "-c", str(conf), "-e", str(root / "error.log")]
