// One rate-limit scenario alone, with the rate controller's timeline (when it cut v and raised ^, to what rate and
// concurrency): `node test/bench/rate-timeline.ts b-nginx [windowMs]` — a|b, nginx|simulator ((a) at a known limit,
// (b) at an unknown one; nginx needs the binary). For tuning the controller; `npm run bench` reports the same figures.
import { scenarioRateAboveLimit, scenarioRateAtLimit } from './scenarios.ts';
const which = process.argv[2] ?? 'b-nginx';
const [kind, server] = which.split('-') as ['a' | 'b', 'nginx' | 'simulator'];
const r = kind === 'a' ? await scenarioRateAtLimit(server, 30000) : await scenarioRateAboveLimit(server, Number(process.argv[3] ?? 30000));
const t = r.adapt.timeline.map(([at, rate, c, reason]) => `${at.toFixed(1)}:${reason === 'rate_limited' ? 'v' : '^'}${rate}/${c}`).join(' ');
console.log(JSON.stringify({ which, achieved: r.achievedOverServerLimit, share429: r.share429, byStatus: r.responses.byStatus, steady: r.steadyState }));
console.log(t);
