import { Command, Option } from 'commander';
import pretty from 'pino-pretty';
import { runChat } from './cli/chat.ts';
import { runDoctor } from './cli/doctor.ts';
import { initWorkspaces } from './cli/init.ts';
import { jobsAdd, jobsList, jobsOfGateway, jobsRemove, jobsRun, jobsSetPaused, type JobsAddOptions } from './cli/jobs.ts';
import { runMigrate } from './cli/migrate-command.ts';
import { pairingApprove, pairingList, pairingRevoke } from './cli/pairing.ts';
import { runSessions } from './cli/sessions.ts';
import { launchedByNpmScript, loadConfig } from './config/load.ts';
import type { ResolvedConfig } from './config/resolved.ts';
import { SwitchboardError } from './core/errors.ts';
import { createLogger } from './core/logger.ts';
import { startGateway, VERSION } from './main.ts';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Flags that override the config file and the environment. */
interface ConfigFlags {
  config?: string;
  port?: string;
  host?: string;
  logLevel?: string;
}

const program = new Command();
program.name('switchboard').description('Self-hosted multi-channel chat gateway for LLM agents').version(VERSION)
  .addOption(new Option('-c, --config <file>', 'config file (default: switchboard.json in this folder, or SWITCHBOARD_CONFIG)'));

function config(flags: ConfigFlags = {}): ResolvedConfig {
  const overrides: Record<string, unknown> = {};
  const overrideSources: Record<string, string> = {};
  if (flags.port !== undefined) { overrides.gateway = { port: flags.port }; overrideSources['gateway.port'] = '--port'; }
  if (flags.host !== undefined) { overrides.gateway = { ...(overrides.gateway as object), host: flags.host }; overrideSources['gateway.host'] = '--host'; }
  if (flags.logLevel !== undefined) { overrides.logLevel = flags.logLevel; overrideSources.logLevel = '--log-level'; }
  return loadConfig({ configPath: flags.config ?? program.opts<{ config?: string }>().config, overrides, overrideSources });
}

/** One readable line per event, for a terminal (file descriptor 1 or 2). */
const prettyTo = (fd: 1 | 2) => pretty({ colorize: !process.env.NO_COLOR, sync: true, translateTime: 'SYS:HH:MM:ss', ignore: 'pid,hostname,service', destination: fd });

const portOption = () => new Option('-p, --port <port>', 'HTTP port (overrides gateway.port and SWITCHBOARD_PORT)');
const hostOption = () => new Option('-H, --host <address>', 'address to listen on (overrides gateway.host and SWITCHBOARD_HOST)');
const logLevelOption = () => new Option('-l, --log-level <level>', `log level: ${LOG_LEVELS.join(', ')}`);

program.command('start').description('run the gateway')
  .option('-c, --config <file>', 'config file').addOption(portOption()).addOption(hostOption()).addOption(logLevelOption())
  .action(async (flags: ConfigFlags) => {
    const resolved = config(flags);
    // A terminal gets one readable line per event; anything else (a file, journald, a container) gets JSON.
    const destination = process.stdout.isTTY ? prettyTo(1) : undefined;
    const logger = createLogger({ level: resolved.logLevel, secrets: resolved.secrets, ...(destination ? { destination } : {}) });
    const running = await startGateway({ config: resolved, logger });
    let signals = 0;
    const shutdown = (signal: string) => {
      signals++;
      if (signals > 1) {
        running.logger.warn(`${signal} again: exiting now`);
        process.exit(130);
      }
      void running.stop().then(() => process.exit(0), (error: unknown) => {
        running.logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      });
    };
    process.on('SIGINT', () => shutdown('SIGINT'));
    process.on('SIGTERM', () => shutdown('SIGTERM'));
    if (launchedByNpmScript()) {
      // `npm start` runs us under `sh -c`, and a SIGTERM to npm stops the shell but not us: when our parent
      // goes away, stop as if signalled, so the port and the store are released.
      const parent = process.ppid;
      setInterval(() => { if (process.ppid !== parent && signals === 0) shutdown('parent exit'); }, 500).unref();
    }
  });

program.command('chat').description('chat with the agent in this terminal (channel cli), through the running gateway if there is one')
  .option('-u, --user <name>', 'your user name', process.env.USER ?? 'me').addOption(logLevelOption())
  .action(async (opts: { user: string; logLevel?: string }) => {
    const resolved = config({ logLevel: opts.logLevel });
    // Warnings go to stderr, readable lines when it is a terminal (the chat itself is on stdout).
    const logger = createLogger({ level: opts.logLevel ?? 'warn', secrets: resolved.secrets, destination: process.stderr.isTTY ? prettyTo(2) : process.stderr });
    const color = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
    await runChat({ config: resolved, user: opts.user, input: process.stdin, output: process.stdout, logger, color });
    process.exit(0);
  });

program.command('sessions').description('list stored sessions (through the running gateway if there is one)')
  .option('--json', 'print JSON').option('--active', 'only sessions active in the last 24 hours').option('--channel <channel>', 'only this channel')
  .option('--agent <agentId>', 'only this agent').option('--limit <n>', 'at most this many', '1000')
  .action(async (opts: { json?: boolean; active?: boolean; channel?: string; agent?: string; limit: string }) => {
    await runSessions(config(), { ...opts, limit: Math.max(1, Number(opts.limit) || 1000), now: Date.now() }, process.stdout);
  });

const pairing = program.command('pairing').description('DM pairing: list requests, approve a code, revoke a peer');
pairing.command('list').description('pending codes and paired peers').option('--json', 'print JSON').action(async (opts: { json?: boolean }) => {
  await pairingList(config(), Boolean(opts.json), process.stdout, process.stderr);
});
pairing.command('approve').description('approve a pairing code').argument('<channel>').argument('<code>').action(async (channel: string, code: string) => {
  await pairingApprove(config(), channel, code, process.stdout, process.stderr);
});
pairing.command('revoke').description('remove a paired peer').argument('<channel>').argument('<peer>').action(async (channel: string, peer: string) => {
  if (!(await pairingRevoke(config(), channel, peer, process.stdout))) process.exitCode = 1;
});

const jobs = program.command('jobs').description('scheduled jobs of the running gateway: list, add, remove, run now, pause, resume');
jobs.command('list').description('every job: id, schedule, next run, last run and outcome, paused').option('--json', 'print JSON')
  .action(async (opts: { json?: boolean }) => { await jobsList(await jobsOfGateway(config()), Boolean(opts.json), process.stdout); });
jobs.command('add').description('add a job that runs a prompt on a schedule and delivers the answer to a chat')
  .requiredOption('--schedule <when>', 'a cron expression ("0 8 * * *"), "every 30m", or an ISO time for a one-off')
  .requiredOption('--prompt <text>', 'what the agent is asked at each run')
  .requiredOption('--channel <channel>', 'where the answer goes: telegram, discord, slack or webchat')
  .option('--peer <id>', 'a direct chat: the person\'s platform id').option('--group <id>', 'a group or channel id').option('--thread <id>', 'a thread or topic in the group')
  .option('--account <id>', 'the channel account (default: default)').option('--agent <agentId>', 'the agent that answers')
  .option('--tz <zone>', 'IANA time zone of the schedule, e.g. Europe/Berlin').option('--id <id>', 'the job id (default: made up)')
  .option('--session <key>', 'run in this session instead of the job\'s own').option('--token-budget <n>', 'input + output tokens one run may use')
  .action(async (opts: JobsAddOptions) => { await jobsAdd(await jobsOfGateway(config()), opts, process.stdout); });
jobs.command('remove').description('remove a job (jobs of the config file stay: edit the config)').argument('<id>')
  .action(async (id: string) => { await jobsRemove(await jobsOfGateway(config()), id, process.stdout); });
jobs.command('run').description('run a job now, once').argument('<id>')
  .action(async (id: string) => { await jobsRun(await jobsOfGateway(config()), id, process.stdout); });
jobs.command('pause').description('stop a job from running until resumed').argument('<id>')
  .action(async (id: string) => { await jobsSetPaused(await jobsOfGateway(config()), id, true, process.stdout); });
jobs.command('resume').description('let a paused job run again').argument('<id>')
  .action(async (id: string) => { await jobsSetPaused(await jobsOfGateway(config()), id, false, process.stdout); });

program.command('doctor').description('check the config, state folder, port, providers (each key), channel tokens and DM sessions')
  .addOption(portOption()).addOption(hostOption())
  .option('--completion', 'also make a 1-token completion on each provider\'s model (a paid request)')
  .action(async (flags: ConfigFlags & { completion?: boolean }) => {
    const ok = await runDoctor(config(flags), process.stdout, { completion: flags.completion === true });
    process.exitCode = ok ? 0 : 1;
  });

program.command('migrate').description('copy this one-machine state (entries, transcripts, ledger, pairing, pending messages) into a cluster database')
  .requiredOption('--to <uri>', 'the cluster database, postgres://user:password@host:5432/db')
  .action(async (opts: { to: string }) => {
    await runMigrate({ config: config(), to: opts.to, out: process.stdout });
  });

program.command('init').description("write commented templates of the agent's six workspace files (existing files are kept)")
  .option('--force', 'overwrite existing files')
  .action((opts: { force?: boolean }) => {
    for (const r of initWorkspaces(config(), opts)) process.stdout.write(`${r.action === 'written' ? 'wrote' : 'kept '} ${r.file}${r.action === 'kept' ? ' (exists; --force overwrites)' : ''}\n`);
  });

program.parseAsync(process.argv).catch((error: unknown) => {
  if (error instanceof SwitchboardError) {
    process.stderr.write(`switchboard: ${error.message}\n`);
  } else {
    process.stderr.write(`switchboard: ${(error as Error)?.stack ?? String(error)}\n`);
  }
  process.exit(1);
});
