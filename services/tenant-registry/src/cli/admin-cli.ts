import { runAdminCli } from './commands';
import { loadCliConfig } from './config';

// `npm run admin -- <command> [args]`: the operator's tool for the admin API.
process.exitCode = await runAdminCli(process.argv.slice(2), loadCliConfig(), {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
});
