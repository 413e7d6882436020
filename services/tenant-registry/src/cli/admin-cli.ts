import { runAdminCli } from './commands';
import { createInterface } from 'node:readline/promises';
import { loadCliConfig } from './config';

// `npm run admin -- <command> [args]`: the operator's tool for the admin API.
process.exitCode = await runAdminCli(process.argv.slice(2), loadCliConfig(), {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
  // Touched only by `rules set` without a file and `explain-token -`: opening stdin for other commands would be wasted work.
  stdin: {
    get isTTY() {
      return process.stdin.isTTY === true;
    },
    read: () => readAll(process.stdin),
  },
  // Only on a terminal: a script must say --yes itself.
  ...(process.stdin.isTTY === true && process.stderr.isTTY === true && { ask }),
});

/** One line from the terminal, the question on standard error (standard output stays the answer). */
async function ask(question: string): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return await rl.question(question);
  } finally {
    rl.close();
  }
}

/** Stops reading a little past the largest document the registry takes: the CLI refuses it by size. */
async function readAll(stream: NodeJS.ReadableStream, max = 256 * 1024): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    chunks.push(buf);
    size += buf.length;
    if (size > max) break;
  }
  return Buffer.concat(chunks).toString('utf8');
}
