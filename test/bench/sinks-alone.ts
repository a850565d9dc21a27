// Runs scenario (e) alone (the local path): `node test/bench/sinks-alone.ts [queries]`; prints its JSON.
import { scenarioSinks } from './throughput.ts';

const queries = Number(process.argv[2] ?? 200);
process.stdout.write(`${JSON.stringify(await scenarioSinks(queries), null, 2)}\n`);
