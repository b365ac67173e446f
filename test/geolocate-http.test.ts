import t from 'tap'
import { startServer, type TestServer } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

let s: TestServer
t.before(async () => {
  s = await startServer({ env: { WEFT_TRUSTED_PROXIES: '127.0.0.1', WEFT_GEO_PRELOAD: 'true' } })
})
t.teardown(() => s.stop())

async function geo(query: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${s.url}/geolocate${query}`, { headers })
  return { status: res.status, text: await res.text() }
}

t.test('IPv4: exact range, names, allowed', async (t) => {
  const r = await geo('?ip=1.0.0.1')
  t.equal(r.status, 200)
  t.equal(
    r.text,
    '{"ip":"1.0.0.1","location":{"file_index":0,"range_start_int":16777216,"range_end_int":16777471,' +
      '"range_start_ip":"1.0.0.0","range_end_ip":"1.0.0.255","country_code":"AU","country_name":"Australia"},"allowed":true}',
    'the CSV line 16777216,16777471,AU',
  )
  const denied = JSON.parse((await geo('?ip=2.144.10.20')).text)
  t.match(denied, {
    ip: '2.144.10.20',
    location: { country_code: 'IR', country_name: 'Iran', range_start_ip: '2.144.0.0', range_end_ip: '2.147.255.255' },
    allowed: false,
  })
})

t.test('IPv6: 128-bit integers are exact JSON integers', async (t) => {
  const r = await geo('?ip=2001:4860:4860::8888')
  t.equal(r.status, 200)
  t.match(r.text, /"range_start_int":42541956101370907050197289607612071936,/)
  t.match(r.text, /"range_end_int":42541956180599069564461627201156022271,/)
  const j = JSON.parse(r.text)
  t.match(j, {
    ip: '2001:4860:4860::8888',
    location: { file_index: 1, range_start_ip: '2001:4860::', range_end_ip: '2001:4860:ffff:ffff:ffff:ffff:ffff:ffff', country_code: 'US' },
    allowed: true,
  })
  const upper = JSON.parse((await geo('?ip=2A00:1450:4001:081B:0:0:0:200E')).text)
  t.equal(upper.ip, '2a00:1450:4001:81b::200e', 'canonical (RFC 5952) form of the input')
  const kp = JSON.parse((await geo('?ip=2001:678:10ec:f002::1')).text)
  t.match(kp, { location: { country_code: 'KP' }, allowed: false })
  const mapped = JSON.parse((await geo('?ip=::ffff:1.0.0.1')).text)
  t.match(mapped, { ip: '1.0.0.1', location: { file_index: 0, country_code: 'AU' } }, 'IPv4-mapped is IPv4')
})

t.test('bad input → 422 in the detail shape; unknown → 404', async (t) => {
  for (const bad of [
    '',
    'abc',
    '1.2.3',
    '256.1.1.1',
    '01.2.3.4',
    '1.2.3.4%20',
    '::1::',
    'fe80::1%25eth0',
    '[::1]',
    'x'.repeat(5000),
    "1.1.1.1' OR 1=1",
  ]) {
    const r = await geo('?ip=' + encodeURIComponent(bad).replace(/%2520/, '%20'))
    t.equal(r.status, 422, `ip=${bad.slice(0, 30)}`)
    const j = JSON.parse(r.text)
    t.equal(j.detail[0].loc[0], 'query')
    t.equal(j.detail[0].loc[1], 'ip')
  }
  const lo = await geo('?ip=127.0.0.1')
  t.equal(lo.status, 404)
  t.match(JSON.parse(lo.text), { reason: /No location is known for 127.0.0.1/ })
  const priv = await geo('?ip=10.1.2.3')
  t.equal(priv.status, 404)
})

t.test('no ip: the client address; X-Forwarded-For only from a trusted proxy', async (t) => {
  const self = await geo('')
  t.equal(self.status, 404, 'loopback client is in no range')
  t.match(JSON.parse(self.text), { reason: /127\.0\.0\.1/ })
  // The test client connects from 127.0.0.1, configured as a trusted proxy for this server.
  const fwd = JSON.parse((await geo('', { 'x-forwarded-for': '203.0.113.5, 1.0.0.7' })).text)
  t.match(fwd, { ip: '1.0.0.7', location: { country_code: 'AU' } }, 'rightmost untrusted hop')
  const spoof = JSON.parse((await geo('', { 'x-forwarded-for': '1.0.0.9, 127.0.0.1' })).text)
  t.equal(spoof.ip, '1.0.0.9', 'trusted hops are skipped')
})

t.test('X-Forwarded-For is ignored from untrusted peers', async (t) => {
  const other = await startServer()
  t.teardown(() => other.stop())
  const r = await fetch(`${other.url}/geolocate`, { headers: { 'x-forwarded-for': '1.0.0.7' } })
  t.equal(r.status, 404)
  t.match(await r.json(), { reason: /127\.0\.0\.1/ })
})
