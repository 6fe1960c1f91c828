"""A minimal HTTP/1.1 client over asyncio streams, with a Server-Sent Events reader.

One connection per request (`Connection: close`); bodies in Content-Length, chunked, or
read-to-close framing. Plain http only: the load client talks to servers on this machine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import json
import socket
import urllib.parse
from typing import AsyncIterator, Optional


class HttpError(Exception):
    """A transport or protocol failure (not an HTTP status)."""


@dataclasses.dataclass
class Endpoint:
    """Where requests go, from a base URL such as http://127.0.0.1:8080 or .../v1."""

    host: str
    port: int
    prefix: str  # path prefix ending in /v1

    @staticmethod
    def parse(base_url: str) -> "Endpoint":
        u = urllib.parse.urlsplit(base_url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"base URL must be http://HOST[:PORT][/v1], got {base_url!r}")
        path = u.path.rstrip("/")
        if not path.endswith("/v1"):
            path += "/v1"
        return Endpoint(u.hostname, u.port or 80, path)

    def is_loopback(self) -> bool:
        try:
            infos = socket.getaddrinfo(self.host, self.port, proto=socket.IPPROTO_TCP)
        except socket.gaierror:
            return False
        return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


@dataclasses.dataclass
class Response:
    status: int
    headers: dict[str, str]  # lower-case names
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def close(self) -> None:
        self.writer.close()

    async def body_chunks(self) -> AsyncIterator[bytes]:
        """The body, de-chunked, as it arrives."""
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            while True:
                size_line = await self.reader.readline()
                if not size_line:
                    raise HttpError("connection closed inside a chunked body")
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (await self.reader.readline()).strip():  # trailers
                        pass
                    return
                data = await self.reader.readexactly(size)
                await self.reader.readexactly(2)  # CRLF
                yield data
        elif "content-length" in self.headers:
            left = int(self.headers["content-length"])
            while left > 0:
                data = await self.reader.read(min(left, 65536))
                if not data:
                    raise HttpError(f"connection closed with {left} body bytes missing")
                left -= len(data)
                yield data
        else:
            while data := await self.reader.read(65536):
                yield data

    async def body(self, limit: int = 16 << 20) -> bytes:
        parts, n = [], 0
        async for c in self.body_chunks():
            parts.append(c)
            n += len(c)
            if n > limit:
                raise HttpError(f"response body over {limit} bytes")
        return b"".join(parts)


async def request(ep: Endpoint, method: str, path: str, body: Optional[dict] = None,
                  api_key: Optional[str] = None) -> Response:
    """Sends one request and reads the status line and headers. The caller closes the Response."""
    reader, writer = await asyncio.open_connection(ep.host, ep.port, limit=1 << 20)
    payload = b"" if body is None else json.dumps(body).encode()
    head = [f"{method} {path} HTTP/1.1", f"Host: {ep.host}:{ep.port}", "Connection: close",
            "Accept: text/event-stream, application/json", "User-Agent: pagedkv-load-client"]
    if body is not None:
        head += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    if api_key:
        head.append(f"Authorization: Bearer {api_key}")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
    try:
        await writer.drain()
        status_line = await reader.readline()
        parts = status_line.decode("latin-1").split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise HttpError(f"bad status line {status_line!r}")
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return Response(int(parts[1]), headers, reader, writer)
    except BaseException:
        writer.close()
        raise


async def sse_events(resp: Response) -> AsyncIterator[str]:
    """The `data` of each Server-Sent Event, joined over multi-line events, until the body ends."""
    buf = b""
    data: list[str] = []
    async for chunk in resp.body_chunks():
        buf += chunk
        while (nl := buf.find(b"\n")) >= 0:
            line, buf = buf[:nl].rstrip(b"\r").decode("utf-8", "replace"), buf[nl + 1:]
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
            elif line.startswith("data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(" ") else value)
            # other fields (event:, id:, retry:) and comments (":") are ignored
    if buf.strip().startswith(b"data:"):
        data.append(buf.strip()[5:].decode("utf-8", "replace").strip())
    if data:
        yield "\n".join(data)
