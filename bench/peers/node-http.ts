import http from 'node:http'
import { loadConfig, parseFlags } from '../../src/core/config.js'
import { createLogger } from '../../src/core/log.js'
import { startServer } from '../../src/server.js'
import { tooLarge, statusLine, type App, type Exchange } from '../../src/http/app.js'
import { DomainError } from '../../src/core/errors.js'
import { READ_HEADERS, type RequestHeaders } from '../../src/api/route.js'
import type { Listening } from '../../src/http/uws.js'

/**
 * The bench peer: weft's own request pipeline, routes, auth and logging served by node:http
 * instead of uWebSockets.js. Whatever differs between the two is the front end alone.
 */
class NodeExchange implements Exchange {
  aborted = false
  private abortCbs: (() => void)[] = []
  readonly method: string
  readonly path: string
  readonly query: string
  readonly headers: RequestHeaders

  constructor(
    private readonly req: http.IncomingMessage,
    private readonly res: http.ServerResponse,
  ) {
    const url = req.url ?? '/'
    const q = url.indexOf('?')
    this.method = req.method ?? 'GET'
    this.path = q < 0 ? url : url.slice(0, q)
    this.query = q < 0 ? '' : url.slice(q + 1)
    const h = {} as RequestHeaders
    for (const name of READ_HEADERS) {
      const v = req.headers[name]
      h[name] = Array.isArray(v) ? v.join(', ') : (v ?? '')
    }
    this.headers = h
    res.on('close', () => {
      if (!res.writableFinished) {
        this.aborted = true
        for (const cb of this.abortCbs.splice(0)) cb()
      }
    })
  }

  peerAddress(): string {
    return this.req.socket.remoteAddress ?? ''
  }

  onAbort(cb: () => void): void {
    if (this.aborted) cb()
    else this.abortCbs.push(cb)
  }

  readBody(limit: number): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = []
      let size = 0
      this.req.on('data', (c: Buffer) => {
        size += c.length
        if (size > limit) {
          reject(tooLarge(limit))
          this.req.removeAllListeners('data')
          return
        }
        chunks.push(c)
      })
      this.req.on('end', () => resolve(Buffer.concat(chunks, size)))
      this.onAbort(() => reject(new DomainError(400, 'Client disconnected')))
    })
  }

  send(status: number, headers: [string, string][], body: string | Buffer, close: boolean): void {
    if (this.aborted) return
    for (const [k, v] of headers) this.res.setHeader(k, v)
    if (close) this.res.setHeader('connection', 'close')
    this.res.statusCode = status
    this.res.statusMessage = statusLine(status).slice(4)
    this.res.end(body)
  }

  beginStream(status: number, headers: [string, string][]): void {
    for (const [k, v] of headers) this.res.setHeader(k, v)
    this.res.statusCode = status
  }

  write(chunk: string | Uint8Array): Promise<void> {
    if (this.aborted || this.res.write(chunk)) return Promise.resolve()
    return new Promise((r) => {
      this.res.once('drain', r)
      this.onAbort(r)
    })
  }

  endStream(): void {
    if (!this.aborted) this.res.end()
  }
}

export function serveNodeHttp(app: App, host: string, port: number): Promise<Listening> {
  const server = http.createServer({ keepAliveTimeout: 10_000 }, (req, res) => {
    void app.dispatch(new NodeExchange(req, res))
  })
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      const addr = server.address()
      resolve({ port: typeof addr === 'object' && addr ? addr.port : port, stopListening: () => server.close() })
    })
  })
}

// `node dist/bench/peers/node-http.js --port P --data-dir D`: same flags and output as `weft serve`.
const { flags } = parseFlags(process.argv.slice(2))
const config = loadConfig(flags)
const log = createLogger(config.logLevel)
const server = await startServer(config, log, { serve: serveNodeHttp })
process.stdout.write(`node:http peer listening on ${server.url}\n`)
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)))
process.on('SIGINT', () => void server.close().then(() => process.exit(0)))
