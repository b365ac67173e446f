import net from 'node:net'

/** One HTTP/1.1 response as read off a raw socket. */
export interface RawResponse {
  status: number
  headers: Record<string, string>
  body: string
}

/**
 * A raw TCP connection to the server, for what fetch and node:http will not send: partial headers, odd header
 * names, pipelined requests, bodies that never finish. Responses are parsed as they come (Content-Length or
 * chunked bodies).
 */
export class RawConn {
  readonly sock: net.Socket
  private buf = Buffer.alloc(0)
  private waiters: (() => void)[] = []
  closed = false

  constructor(url: string) {
    const u = new URL(url)
    this.sock = net.connect(Number(u.port), u.hostname)
    this.sock.on('data', (d) => {
      this.buf = Buffer.concat([this.buf, d])
      this.wake()
    })
    this.sock.on('error', () => {})
    this.sock.on('close', () => {
      this.closed = true
      this.wake()
    })
  }

  static async open(url: string): Promise<RawConn> {
    const c = new RawConn(url)
    await new Promise<void>((resolve, reject) => {
      c.sock.once('connect', resolve)
      c.sock.once('error', reject)
    })
    return c
  }

  write(data: string | Buffer): void {
    this.sock.write(data)
  }

  /** The next response, or null when the connection closes (or `timeoutMs` passes) before a whole one came. */
  async response(timeoutMs = 10_000): Promise<RawResponse | null> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const r = this.take()
      if (r) return r
      if (this.closed || Date.now() >= deadline) return null
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, deadline - Date.now())
        this.waiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
  }

  /** Resolves true when the server closes the connection within `timeoutMs`. */
  async closedWithin(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs
    while (!this.closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()))
        this.waiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
    return this.closed
  }

  /** Bytes received and not yet parsed as a response. */
  get pending(): number {
    return this.buf.length
  }

  destroy(): void {
    this.sock.destroy()
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w()
  }

  private take(): RawResponse | null {
    const end = this.buf.indexOf('\r\n\r\n')
    if (end < 0) return null
    const lines = this.buf.subarray(0, end).toString('latin1').split('\r\n')
    const status = Number(lines[0]!.split(' ')[1])
    const headers: Record<string, string> = {}
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':')
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim()
    }
    let rest = this.buf.subarray(end + 4)
    let body: Buffer
    if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length'])
      if (rest.length < n) return null
      body = rest.subarray(0, n)
      rest = rest.subarray(n)
    } else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      const parts: Buffer[] = []
      for (;;) {
        const eol = rest.indexOf('\r\n')
        if (eol < 0) return null
        const size = parseInt(rest.subarray(0, eol).toString('latin1'), 16)
        if (rest.length < eol + 2 + size + 2) return null
        parts.push(rest.subarray(eol + 2, eol + 2 + size))
        rest = rest.subarray(eol + 2 + size + 2)
        if (size === 0) break
      }
      body = Buffer.concat(parts)
    } else {
      // No length: the body runs to the close.
      if (!this.closed) return null
      body = rest
      rest = Buffer.alloc(0)
    }
    this.buf = rest
    return { status, headers, body: body.toString('utf8') }
  }
}

/** A request's bytes: method, path, headers (Host and, unless given, Content-Length added), body. */
export function rawRequest(method: string, path: string, headers: Record<string, string> = {}, body = ''): string {
  const length = body || method === 'POST' ? { 'content-length': String(Buffer.byteLength(body)) } : {}
  const h = { host: 'localhost', ...length, ...headers }
  return `${method} ${path} HTTP/1.1\r\n${Object.entries(h)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n${body}`
}
