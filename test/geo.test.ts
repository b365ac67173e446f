import t from 'tap'
import {
  FILE_INDEX_IPV4,
  FILE_INDEX_IPV6,
  GEO_FILES,
  loadGeoIndex,
  type GeoIndex,
  type GeoLookup,
  type GeoResult,
} from '../src/geo/index.js'
import { formatIp, normalizeMapped, parseIp } from '../src/geo/ip.js'

// Expected ranges below were read by hand from the package's text CSVs (geo-whois-asn-country-ipv4.csv
// and -ipv6.csv) and their -num.csv twins, at data version 2.3.2026061719.

// Time limits are on this process's CPU time: on a shared CI machine wall time mostly measures the
// neighbours (a saturated 2-core box stretched an 0.4 s load to 8 s wall).
function cpuMs(since: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(since)
  return (d.user + d.system) / 1000
}

const cpuAtStart = process.cpuUsage()
const started = performance.now()
const geo: GeoIndex = await loadGeoIndex()
const loadMs = performance.now() - started
const loadCpuMs = cpuMs(cpuAtStart)

function found(r: GeoLookup): GeoResult {
  if (!r.ok) throw new Error(`expected a location, got ${JSON.stringify(r)}`)
  return r.result
}

t.test('loads both files', async (t) => {
  t.ok(loadCpuMs < 5000, `load took ${Math.round(loadCpuMs)} ms CPU, ${Math.round(loadMs)} ms wall`)
  t.equal(geo.stats.ipv4Rows, 334373)
  t.equal(geo.stats.ipv6Rows, 216295)
  t.ok(geo.stats.countries > 200 && geo.stats.countries < 300)
  t.equal(FILE_INDEX_IPV4, 0)
  t.equal(FILE_INDEX_IPV6, 1)
  t.same(GEO_FILES, ['geo-whois-asn-country-ipv4-num.csv', 'geo-whois-asn-country-ipv6-num.csv'])
})

t.test('IPv4 ranges', async (t) => {
  t.same(geo.lookup('1.0.0.1'), {
    ok: true,
    result: {
      ip: '1.0.0.1',
      location: {
        file_index: 0,
        range_start_int: 16777216n,
        range_end_int: 16777471n,
        range_start_ip: '1.0.0.0',
        range_end_ip: '1.0.0.255',
        country_code: 'AU',
        country_name: 'Australia',
      },
    },
  })
  // First and last address of a range, and the first address of the next one.
  for (const ip of ['1.0.1.0', '1.0.3.255']) {
    t.match(
      found(geo.lookup(ip)).location,
      {
        range_start_ip: '1.0.1.0',
        range_end_ip: '1.0.3.255',
        range_start_int: 16777472n,
        range_end_int: 16778239n,
        country_code: 'CN',
        country_name: 'China',
      },
      ip,
    )
  }
  t.match(found(geo.lookup('1.0.4.0')).location, { range_start_ip: '1.0.4.0', country_code: 'AU' })
  // The last row of the file: 223.255.255.0,223.255.255.255,AU.
  t.match(found(geo.lookup('223.255.255.255')).location, { range_start_int: 3758096128n, range_end_int: 3758096383n, country_code: 'AU' })
  t.same(geo.lookup('224.0.0.1'), { ok: false, error: 'not_found', ip: '224.0.0.1' })
})

t.test('IPv4 gap: 9.252.0.0-9.255.255.255 US, nothing for 10/8, 11.0.0.0-13.34.0.11 US', async (t) => {
  t.match(found(geo.lookup('9.255.255.255')).location, {
    range_start_int: 167510016n,
    range_end_int: 167772159n,
    range_start_ip: '9.252.0.0',
    country_code: 'US',
    country_name: 'United States',
  })
  t.same(geo.lookup('10.0.0.0'), { ok: false, error: 'not_found', ip: '10.0.0.0' })
  t.same(geo.lookup('10.255.255.255'), { ok: false, error: 'not_found', ip: '10.255.255.255' })
  t.match(found(geo.lookup('11.0.0.0')).location, {
    range_start_int: 184549376n,
    range_end_int: 220332043n,
    range_end_ip: '13.34.0.11',
    country_code: 'US',
  })
})

t.test('overlapping rows: the narrowest range containing the address answers', async (t) => {
  // 2.58.196.0-2.58.197.255 DE holds 2.58.197.15 BE and 2.58.197.16-2.58.197.255 DE.
  t.match(found(geo.lookup('2.58.197.14')).location, {
    range_start_int: 37405696n,
    range_end_int: 37406207n,
    range_start_ip: '2.58.196.0',
    range_end_ip: '2.58.197.255',
    country_code: 'DE',
    country_name: 'Germany',
  })
  t.match(found(geo.lookup('2.58.197.15')).location, {
    range_start_int: 37405967n,
    range_end_int: 37405967n,
    range_start_ip: '2.58.197.15',
    range_end_ip: '2.58.197.15',
    country_code: 'BE',
    country_name: 'Belgium',
  })
  t.match(found(geo.lookup('2.58.197.16')).location, { range_start_int: 37405968n, range_end_int: 37406207n, country_code: 'DE' })
  // 5.61.192.0-5.61.199.255 FR and 5.61.192.0-5.61.193.255 SK start together.
  t.match(found(geo.lookup('5.61.192.0')).location, {
    range_start_ip: '5.61.192.0',
    range_end_ip: '5.61.193.255',
    range_start_int: 87932928n,
    range_end_int: 87933439n,
    country_code: 'SK',
  })
  t.ok(geo.stats.ipv4OverlappingRows > 0 && geo.stats.ipv6OverlappingRows > 0, 'the published data does overlap')
})

t.test('IPv6 ranges', async (t) => {
  t.same(geo.lookup('2001:2::1'), {
    ok: true,
    result: {
      ip: '2001:2::1',
      location: {
        file_index: 1,
        range_start_int: 42540488320432167789079031612388147200n,
        range_end_int: 42540488320433376714898646241562853375n,
        range_start_ip: '2001:2::',
        range_end_ip: '2001:2:0:ffff:ffff:ffff:ffff:ffff',
        country_code: 'JP',
        country_name: 'Japan',
      },
    },
  })
  // 2001:200::/32 is commonly JP, but this data version has 2001:200::-2001:218:2000:51:ffff:ffff:ffff:ffff as AU.
  for (const ip of ['2001:200::', '2001:0200:0000:0000:0000:0000:0000:0001', '2001:218:2000:51:FFFF:FFFF:FFFF:FFFF']) {
    const r = found(geo.lookup(ip))
    t.match(
      r.location,
      {
        file_index: 1,
        range_start_int: 42540528726795050063891204319802818560n,
        range_end_int: 42540530638174472233151362808233852927n,
        range_start_ip: '2001:200::',
        range_end_ip: '2001:218:2000:51:ffff:ffff:ffff:ffff',
        country_code: 'AU',
      },
      ip,
    )
  }
  t.equal(found(geo.lookup('2001:0200:0000:0000:0000:0000:0000:0001')).ip, '2001:200::1', 'canonical ip')
  t.match(found(geo.lookup('2001:218:2000:52::')).location, { range_start_ip: '2001:218:2000:52::', country_code: 'JP' })
  t.same(geo.lookup('2001:1::1'), { ok: false, error: 'not_found', ip: '2001:1::1' }, 'before the first range')
  t.same(geo.lookup('2001:3::'), { ok: false, error: 'not_found', ip: '2001:3::' }, 'gap after 2001:2::/48')
  t.match(found(geo.lookup('2a00:1450:4001::1')).location, { range_start_ip: '2a00:1450::', country_code: 'IE', country_name: 'Ireland' })
})

t.test('IPv4-mapped IPv6 answers as IPv4', async (t) => {
  const v4 = geo.lookup('1.0.0.1')
  for (const ip of ['::ffff:1.0.0.1', '::FFFF:1.0.0.1', '::ffff:100:1', '0:0:0:0:0:ffff:0100:0001']) t.same(geo.lookup(ip), v4, ip)
  t.same(geo.lookup('::ffff:127.0.0.1'), { ok: false, error: 'not_found', ip: '127.0.0.1' })
  t.same(normalizeMapped(parseIp('::ffff:1.2.3.4')!), { version: 4, value: 0x01020304n })
  t.same(normalizeMapped(parseIp('::1.2.3.4')!), { version: 6, value: 0x01020304n }, 'IPv4-compatible is not mapped')
})

t.test('loopback and unspecified are not found', async (t) => {
  for (const [ip, canonical] of [
    ['127.0.0.1', '127.0.0.1'],
    ['::1', '::1'],
    ['0:0:0:0:0:0:0:1', '::1'],
    ['0.0.0.0', '0.0.0.0'],
    ['::', '::'],
  ]) {
    t.same(geo.lookup(ip!), { ok: false, error: 'not_found', ip: canonical }, ip)
  }
})

t.test('invalid input', async (t) => {
  const invalid = [
    '',
    '1.2.3',
    '256.1.1.1',
    '01.2.3.4',
    '1.2.3.04',
    '1.2.3.4 ',
    ' 1.2.3.4',
    '1.2.3.4.5',
    '1..2.3',
    '1.2.3.',
    '-1.2.3.4',
    '1.2.3.4/24',
    '0x1.2.3.4',
    '16777217',
    '::1::',
    'gggg::',
    'fe80::1%eth0',
    '[::1]',
    '[::1]:80',
    ':',
    ':::',
    '1:::2',
    ':1::',
    '1::2:',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7::8',
    '1:2:3:4:5:6:7',
    '12345::',
    '::ffff:1.2.3',
    '::ffff:01.2.3.4',
    '::ffff:1.2.3.4:1',
    '1.2.3.4::',
    '1:2:3:4:5:6:7:1.2.3.4',
    '::ffff:256.0.0.0',
    '2001:db8::\u0661',
    '１.2.3.4',
    'x'.repeat(10_000),
    '1'.repeat(46),
    ':'.repeat(10_000),
  ]
  for (const ip of invalid) {
    t.same(geo.lookup(ip), { ok: false, error: 'invalid_ip' }, JSON.stringify(ip.length > 50 ? `${ip.slice(0, 20)}… (${ip.length})` : ip))
    t.equal(parseIp(ip), null)
  }
})

t.test('parseIp values', async (t) => {
  t.same(parseIp('1.2.3.4'), { version: 4, value: 0x01020304n })
  t.same(parseIp('255.255.255.255'), { version: 4, value: 0xffffffffn })
  t.same(parseIp('::'), { version: 6, value: 0n })
  t.same(parseIp('::1'), { version: 6, value: 1n })
  t.same(parseIp('1::'), { version: 6, value: 1n << 112n })
  t.same(parseIp('1::2:3:4:5:6:7'), { version: 6, value: (1n << 112n) | 0x0002_0003_0004_0005_0006_0007n })
  t.same(parseIp('ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255'), { version: 6, value: (1n << 128n) - 1n }, 'longest form, 45 chars')
  t.same(parseIp('64:ff9b::192.0.2.33'), { version: 6, value: (0x64n << 112n) | (0xff9bn << 96n) | 0xc0000221n })
})

t.test('formatIp (RFC 5952)', async (t) => {
  const table: [string, string][] = [
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['2001:0db8:0:0:0:0:2:1', '2001:db8::2:1'],
    ['2001:db8::0:1', '2001:db8::1'],
    ['2001:DB8::1', '2001:db8::1'],
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'],
    ['2001:0:0:1:0:0:0:1', '2001:0:0:1::1'],
    ['2001:db8:aaaa:bbbb:cccc:dddd:eeee:0001', '2001:db8:aaaa:bbbb:cccc:dddd:eeee:1'],
    ['0:0:0:0:0:0:0:0', '::'],
    ['0:0:0:0:0:0:0:1', '::1'],
    ['1:0:0:0:0:0:0:0', '1::'],
    ['1:0:0:2:0:0:0:3', '1:0:0:2::3'],
    ['fe80:0000:0000:0000:0204:61ff:fe9d:f156', 'fe80::204:61ff:fe9d:f156'],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
    ['::ffff:0102:0304', '::ffff:1.2.3.4'],
    ['::1.2.3.4', '::102:304'],
    ['64:ff9b::192.0.2.33', '64:ff9b::c000:221'],
    ['0.0.0.0', '0.0.0.0'],
    ['192.0.2.1', '192.0.2.1'],
    ['255.255.255.255', '255.255.255.255'],
  ]
  for (const [input, canonical] of table) {
    const p = parseIp(input)
    t.ok(p, input)
    t.equal(formatIp(p!.version, p!.value), canonical, input)
    t.same(parseIp(canonical), p, `${canonical} parses back`)
  }
  t.throws(() => formatIp(4, 1n << 32n), RangeError)
  t.throws(() => formatIp(6, 1n << 128n), RangeError)
  t.throws(() => formatIp(6, -1n), RangeError)
})

t.test('lookup throughput', async (t) => {
  const ips: string[] = []
  for (let i = 0; i < 1000; i++) {
    const a = (i * 2654435761) >>> 0
    ips.push(`${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}`)
    ips.push(`2${(a & 0xfff).toString(16).padStart(3, '0')}:${(a >>> 16).toString(16)}::${(i & 0xffff).toString(16)}`)
  }
  let ok = 0
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  for (let i = 0; i < 100_000; i++) if (geo.lookup(ips[i % ips.length]!).ok) ok++
  const ms = performance.now() - t0
  const cpu = cpuMs(cpu0)
  t.ok(ok > 10_000, `${ok} of 100k found`)
  // A linear scan instead of bisection would take minutes here, not seconds.
  t.ok(cpu < 2000, `100k lookups in ${Math.round(cpu)} ms CPU, ${Math.round(ms)} ms wall`)
})

t.test('rejects malformed, unsorted and missing files; resolves overlaps', async (t) => {
  const v6 = '42540488320432167789079031612388147200,42540488320433376714898646241562853375,JP\n'
  const load = (v4: string, v6text = v6) => loadGeoIndex({ dir: t.testdir({ [GEO_FILES[0]]: v4, [GEO_FILES[1]]: v6text }) })
  await t.rejects(load('20,29,US\n10,19,CA\n'), /ipv4-num\.csv line 2: rows are not sorted/)
  await t.rejects(load('10,9,US\n'), /line 1: range start is after range end/)
  await t.rejects(load('10,4294967296,US\n'), /line 1: expected a range end/)
  await t.rejects(load('10,20,us\n'), /line 1: expected a two-letter upper-case country code/)
  await t.rejects(load('10,20,USA\n'), /line 1: unexpected text/)
  await t.rejects(load('start,end,country_code\n'), /line 1: expected a range start/)
  await t.rejects(load('10,20,US\n', '1,340282366920938463463374607431768211456,US\n'), /ipv6-num\.csv line 1: expected a range end/)
  await t.rejects(loadGeoIndex({ dir: t.testdir({}) }), { code: 'ENOENT' })

  // A: 0.0.0.10-0.0.0.100 holds B 0.0.0.20-0.0.0.29 (and a duplicate B' with another country,
  // which wins as the later row); C 0.0.0.90-0.0.0.120 overlaps A's tail and is narrower.
  const g = await load(
    '10,100,AA\n20,29,BB\n20,29,CC\n90,120,DD\n122,122,EE\n',
    v6 + '42540488320433376714898646241562853376,340282366920938463463374607431768211455,ZZ\r\n',
  )
  const at = (ip: string) => {
    const r = g.lookup(ip)
    return r.ok ? `${r.result.location.country_code} ${r.result.location.range_start_int}-${r.result.location.range_end_int}` : r.error
  }
  t.same(
    [
      '0.0.0.9',
      '0.0.0.10',
      '0.0.0.19',
      '0.0.0.20',
      '0.0.0.29',
      '0.0.0.30',
      '0.0.0.89',
      '0.0.0.90',
      '0.0.0.100',
      '0.0.0.101',
      '0.0.0.120',
      '0.0.0.121',
      '0.0.0.122',
      '0.0.0.123',
    ].map(at),
    [
      'not_found',
      'AA 10-100',
      'AA 10-100',
      'CC 20-29',
      'CC 20-29',
      'AA 10-100',
      'AA 10-100',
      'DD 90-120',
      'DD 90-120',
      'DD 90-120',
      'DD 90-120',
      'not_found',
      'EE 122-122',
      'not_found',
    ],
  )
  t.equal(g.stats.ipv4OverlappingRows, 3)
  t.match(found(g.lookup('ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff')).location, {
    country_code: 'ZZ',
    country_name: 'Unknown Region',
    range_end_ip: 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
  })
  t.match(found(g.lookup('2001:2::')).location, { country_code: 'JP' })
})
