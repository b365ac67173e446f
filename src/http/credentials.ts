import type { RequestHeaders } from '../api/route.js'

/**
 * The API key a request presents, from any of the forms clients use:
 * `Authorization: Basic base64(user:key)` (Weave SDKs send user `api`; `curl -u KEY:` puts the key
 * in the user part), `Authorization: Bearer key` (OpenAI SDKs), or `wandb-api-key: key` (OTel
 * exporters configured for W&B). Both schemes are accepted on every family.
 */
export function credentialsOf(headers: RequestHeaders): string | null {
  const auth = headers.authorization
  if (auth) {
    const sp = auth.indexOf(' ')
    if (sp <= 0) return null
    const scheme = auth.slice(0, sp).toLowerCase()
    const value = auth.slice(sp + 1).trim()
    if (scheme === 'bearer') return value || null
    if (scheme === 'basic') {
      const decoded = Buffer.from(value, 'base64').toString('utf8')
      const colon = decoded.indexOf(':')
      if (colon < 0) return decoded || null
      const password = decoded.slice(colon + 1)
      return password || decoded.slice(0, colon) || null
    }
    return null
  }
  return headers['wandb-api-key'] || null
}
