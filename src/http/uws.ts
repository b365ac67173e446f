import uws from 'uWebSockets.js'
import type { HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js'
import { statusLine, tooLarge, type App, type Exchange } from './app.js'
import { DomainError } from '../core/errors.js'
import { READ_HEADERS, type RequestHeaders } from '../api/route.js'
import { BodyStream } from './body-stream.js'

const STATUS = new Map<number, string>()
function status(code: number): string {
  let s = STATUS.get(code)
  if (s === undefined) STATUS.set(code, (s = statusLine(code)))
  return s
}

class UwsExchange implements Exchange {
  aborted = false
  private finished = false
  private abortCbs: (() => void)[] = []
  /** The wait of a write that met backpressure (see hookWritable). */
  private drained: (() => void) | null = null
  private writableHooked = false
  private peer: string | undefined
  /** A body being streamed to the handler (streamBody routes). */
  private body: BodyStream | undefined

  constructor(
    private readonly res: HttpResponse,
    readonly method: string,
    readonly path: string,
    readonly query: string,
    readonly headers: RequestHeaders,
  ) {}

  abort(): void {
    this.aborted = true
    for (const cb of this.abortCbs.splice(0)) cb()
    // A write waiting for the socket to drain ends too (one wait at a time: see write).
    this.release()
  }

  /** Resolves the current drain wait, if any. */
  private release(): void {
    const drained = this.drained
    this.drained = null
    drained?.()
  }

  onAbort(cb: () => void): void {
    if (this.aborted) cb()
    else this.abortCbs.push(cb)
  }

  peerAddress(): string {
    // The response object is unusable once it has ended or aborted, so read the address on first ask.
    if (this.peer === undefined) {
      this.peer = this.aborted || this.finished ? '' : Buffer.from(this.res.getRemoteAddressAsText()).toString()
    }
    return this.peer
  }

  readBody(limit: number): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      // A declared length (checked against the limit before the body is read) gets one buffer up front, each piece
      // copied into it once: a copy per piece and a concatenation made 10 MB bodies cost ~100 ms of the event loop
      // and its collector. The buffer is the whole of its memory, so a worker can take it by transfer.
      const declared = Number(this.headers['content-length'] || NaN)
      let whole = Number.isSafeInteger(declared) && declared > 0 && declared <= limit ? Buffer.allocUnsafeSlow(declared) : null
      const chunks: Buffer[] = []
      let size = 0
      let failed = false
      this.onAbort(() => {
        failed = true
        reject(new DomainError(400, 'Client disconnected'))
      })
      this.res.onData((chunk, isLast) => {
        if (failed) return
        if (size + chunk.byteLength > limit) {
          failed = true
          reject(tooLarge(limit))
          return
        }
        // uWS reuses the chunk's memory once this callback returns: copy it.
        if (whole && size + chunk.byteLength <= whole.length) whole.set(new Uint8Array(chunk), size)
        else {
          // More than declared (uWS frames by the header, so never expected): the pieces so far become the list.
          if (whole) chunks.push(whole.subarray(0, size))
          whole = null
          chunks.push(Buffer.from(chunk.slice(0)))
        }
        size += chunk.byteLength
        if (!isLast) return
        if (whole) resolve(size === whole.length ? whole : whole.subarray(0, size))
        else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size))
      })
    })
  }

  streamBody(limit: number): AsyncIterable<Buffer> {
    const body = (this.body = new BodyStream(limit, {
      pause: () => this.live() && this.res.pause(),
      resume: () => this.live() && this.res.resume(),
    }))
    this.onAbort(() => body.fail(new DomainError(400, 'Client disconnected')))
    // Registered now, in the request's first tick: uWS drops body data that arrives with no handler set.
    this.res.onData((chunk, isLast) => body.push(chunk, isLast))
    return body
  }

  private live(): boolean {
    return !this.aborted && !this.finished
  }

  /**
   * A reply sent before a streamed body was all read (an early 4xx) closes the connection: the unread rest
   * would otherwise be parsed as the next request.
   */
  private unreadBody(): boolean {
    if (!this.body || this.body.complete) return false
    this.body.discard()
    return true
  }

  send(code: number, headers: [string, string][], body: string | Buffer, close: boolean): void {
    if (this.aborted || this.finished) return
    close = this.unreadBody() || close
    this.finished = true
    this.res.cork(() => {
      this.res.writeStatus(status(code))
      for (const [k, v] of headers) this.res.writeHeader(k, v)
      this.res.end(body, close)
    })
  }

  beginStream(code: number, headers: [string, string][]): void {
    if (this.aborted) return
    this.res.cork(() => {
      this.res.writeStatus(status(code))
      for (const [k, v] of headers) this.res.writeHeader(k, v)
    })
  }

  write(chunk: string | Uint8Array): Promise<void> {
    if (this.aborted || this.finished) return Promise.resolve()
    let ok = true
    this.res.cork(() => {
      ok = this.res.write(chunk)
    })
    if (ok) return Promise.resolve()
    // uWS has buffered the chunk; wait until the socket drains before producing more.
    return new Promise((resolve) => {
      // abort() resolves it as well: no abort callback per wait (a long export waits thousands of times).
      this.drained = resolve
      if (!this.writableHooked) this.hookWritable()
    })
  }

  /**
   * One onWritable handler for the response's life, resolving whichever wait is current. uWebSockets.js 20.30 runs a
   * handler borrowed and then puts it back, over any handler registered meanwhile (HttpResponseData::callOnWritable;
   * fixed upstream since); the promise a handler resolves continues in the same microtask checkpoint, so a write that
   * met backpressure again there registered a handler that was then lost, and the answer waited forever. That is what
   * stopped 2-7 of 10-20 1M-call exports through the reader pool (whose batches are queued ahead, so the next write
   * comes at once) after 5-13 MB.
   */
  private hookWritable(): void {
    this.writableHooked = true
    this.res.onWritable(() => {
      this.release()
      return true
    })
  }

  endStream(close: boolean): void {
    if (this.aborted || this.finished) return
    close = this.unreadBody() || close
    this.finished = true
    this.res.cork(() => {
      this.res.end(undefined, close)
    })
  }
}

export interface Listening {
  port: number
  /** Stops accepting connections; requests already in flight go on. */
  stopListening(): void
}

export function serveUws(app: App, host: string, port: number): Promise<Listening> {
  const server: TemplatedApp = uws.App()
  server.any('/*', (res, req) => {
    const headers = {} as RequestHeaders
    for (const h of READ_HEADERS) headers[h] = req.getHeader(h)
    const q = req.getQuery()
    const ex = new UwsExchange(res, req.getMethod().toUpperCase(), req.getUrl(), q ?? '', headers)
    res.onAborted(() => ex.abort())
    void app.dispatch(ex)
  })
  return new Promise((resolve, reject) => {
    server.listen(host, port, (sock: us_listen_socket | false) => {
      if (!sock) {
        reject(new Error(`cannot listen on ${host}:${port} (address in use or not available)`))
        return
      }
      resolve({
        port: uws.us_socket_local_port(sock),
        stopListening: () => uws.us_listen_socket_close(sock),
      })
    })
  })
}
