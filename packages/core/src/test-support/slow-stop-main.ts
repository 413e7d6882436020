// A process whose graceful stop takes a while, for lifecycle tests.
import { runMain } from '../lifecycle';

await runMain(async () => {
  const keepAlive = setInterval(() => {}, 1000);
  return {
    stop: async () => {
      process.stdout.write('stopping\n');
      await new Promise((r) => setTimeout(r, 300));
      clearInterval(keepAlive);
      process.stdout.write('stopped cleanly\n');
    },
  };
});
// runMain has installed its signal handlers once it returns.
process.stdout.write('started\n');
