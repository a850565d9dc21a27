// A run's own thread (run-on-thread.ts starts it): runs the command line it is given and posts back the exit code.
import { reportFailure } from '../run/exit-codes.ts';
import { runThreadData, toParent } from '../threads/run-thread.ts';
import type { ThreadReport, ThreadTask } from './run-on-thread.ts';
import { handOverPipelines, pipelineFileCommandLine, runCommand } from './run-command.ts';

const { task, stderrIsTTY } = runThreadData<{ task: ThreadTask; stderrIsTTY: boolean }>();
const report = (message: ThreadReport) => toParent(message);
if (stderrIsTTY) Object.defineProperty(process.stderr, 'isTTY', { value: true });

if (task.kind === 'command') {
  report({ type: 'exit', code: await runCommand(task.args).catch(reportFailure) });
} else {
  // The file is imported again here; its pipeline is its default export, or what it hands runFromCommandLine.
  const pipeline = await handOverPipelines(task.file, task.pipelineName);
  if (pipeline === undefined) report({ type: 'inProcess' });
  else report({ type: 'exit', code: await pipelineFileCommandLine(pipeline, task.argv, task.file) });
}
