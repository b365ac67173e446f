import net from 'node:net'

/** A port nothing listens on right now, for a server the bench starts. */
export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer()
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port
      srv.close(() => resolve(port))
    })
  })
}

export interface Spread {
  min: number
  median: number
  max: number
}

/** The machine's noise over runs: min, median, max. */
export function spread(xs: number[]): Spread {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  const median = s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
  return { min: s[0]!, median, max: s[s.length - 1]! }
}
