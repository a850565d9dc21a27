// The local path alone: (e) and (f), and the serial bound that run.ts computes from them —
// `node test/bench/sinks-alone.ts [queries]`; prints their JSON.
import { scenarioEndToEnd, scenarioSinks } from './throughput.ts';

const queries = Number(process.argv[2] ?? 200);
const e = await scenarioSinks(queries);
const f = await scenarioEndToEnd(queries);
const micros = (perSecond: number) => 1e6 / perSecond;
const bound = Math.round(1e6 / (micros(f.itemsPerSecond.bareFetchLoop) + micros(e.itemsPerSecond.rawBetterSqlite3SameTable) + micros(e.itemsPerSecond.csvStringifySyncByPage)));
const endToEnd = { ...f, fetchInsertWriteBound: { itemsPerSecond: bound, pipelineOverIt: Math.round((f.itemsPerSecond.pipelineServed / bound) * 1000) / 1000 } };
process.stdout.write(`${JSON.stringify({ e_sinks: e, f_endToEnd: endToEnd }, null, 2)}\n`);
