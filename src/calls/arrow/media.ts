/**
 * Whether an answer is Arrow, apart from the Arrow code itself: every route asks this, and apache-arrow (~150
 * modules, ~0.2 s to load) is imported only when an answer is Arrow (ipc.ts, convert.ts).
 */

/** The media type of the Arrow IPC streaming format. */
export const ARROW_STREAM = 'application/vnd.apache.arrow.stream'

/** Whether an Accept header asks for Arrow IPC streams (listed with a non-zero quality). */
export function acceptsArrow(accept: string | undefined): boolean {
  if (!accept) return false
  return accept.split(',').some((range) => {
    const [type, ...params] = range.split(';').map((x) => x.trim().toLowerCase())
    if (type !== ARROW_STREAM) return false
    const q = params.find((p) => p.startsWith('q='))
    return q === undefined || Number(q.slice(2)) > 0
  })
}
