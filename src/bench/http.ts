/** JSON over HTTP for the harness: the servers it drives are reached only through their public APIs. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

export async function postJson<T>(url: string, body: unknown, headers: Record<string, string> = {}): Promise<T> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
  const text = await res.text()
  if (!res.ok) throw new HttpError(res.status, `POST ${url}: HTTP ${res.status}: ${text.slice(0, 300)}`)
  return (text ? JSON.parse(text) : null) as T
}

export async function getJson<T>(url: string, headers: Record<string, string> = {}): Promise<T> {
  const res = await fetch(url, { headers })
  const text = await res.text()
  if (!res.ok) throw new HttpError(res.status, `GET ${url}: HTTP ${res.status}: ${text.slice(0, 300)}`)
  return JSON.parse(text) as T
}

/** A Weave-compatible trace server's auth: HTTP Basic with user "api", as the weave SDK sends it. */
export const traceAuth = (key: string | undefined): Record<string, string> =>
  key ? { authorization: 'Basic ' + Buffer.from('api:' + key).toString('base64') } : {}

/** Runs `fn` over `items` with at most `limit` at a time, keeping the order of the results. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (x: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      out[i] = await fn(items[i]!, i)
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return out
}
