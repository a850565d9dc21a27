// The package root's way into the command line, for pipeline files. The command line (cli/) and the simulator it may
// start are loaded only when a file asks for them: `import { run } from 'webdata-etl'` loads neither.
import type { Pipeline, PipelineDefinition } from './config/define.ts';
import { EXIT } from './run/exit-codes.ts';
import { exitOnUncaughtInputErrors } from './run/input-errors.ts';
import { handedOver } from './threads/hand-over.ts';

// A pipeline file imports the package before its top level builds the pipeline, which may throw what the command line
// would report: from here on, such an error, uncaught, is said as the command line says it (exit 2).
exitOnUncaughtInputErrors();

/**
 * For pipeline files: `if (import.meta.main) await runFromCommandLine(pipeline)` makes `node pipelines/x.ts` take
 * the same flags as `webdata-etl run`. Sets `process.exitCode`; resolves to it. The run works on a thread of its own
 * with a bounded heap, which imports the file again: its pipeline is its default export, or the one it hands to this
 * function; a file with neither runs here, on the main thread.
 */
export async function runFromCommandLine(pipeline: Pipeline | PipelineDefinition, argv: string[] = process.argv.slice(2)): Promise<number> {
  // On the run's thread, importing the file: handed over before any await, as a file may not await this call.
  if (handedOver(pipeline)) return EXIT.ok;
  const { runPipelineFile } = await import('./cli/run-command.ts');
  return runPipelineFile(pipeline, argv);
}
