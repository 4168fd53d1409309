import { Command, Option } from 'commander';
import { createCliChannel } from '../channels/cli/index.ts';
import { launchedByNpmScript, loadConfig } from './config/load.ts';
import type { ResolvedConfig } from './config/resolved.ts';
import { systemClock } from './core/clock.ts';
import { SwitchboardError } from './core/errors.ts';
import { createLogger } from './core/logger.ts';
import { startGateway, VERSION } from './main.ts';
import { PairingStore } from './routing/pairing.ts';
import { totalTokens } from './sessions/entry.ts';
import { KeyvSessionStore } from './sessions/store.ts';
import { runDoctor } from './doctor.ts';

const program = new Command();
program.name('switchboard').description('Self-hosted multi-channel chat gateway for LLM agents').version(VERSION)
  .addOption(new Option('-c, --config <file>', 'config file (default: switchboard.json in this folder, or SWITCHBOARD_CONFIG)'));

function config(): ResolvedConfig {
  return loadConfig({ configPath: program.opts<{ config?: string }>().config });
}

program.command('start').description('run the gateway').option('-c, --config <file>', 'config file').action(async (opts: { config?: string }) => {
  const resolved = loadConfig({ configPath: opts.config ?? program.opts<{ config?: string }>().config });
  const running = await startGateway({ config: resolved });
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

program.command('chat').description('chat with the agent in this terminal (channel cli)').option('-u, --user <name>', 'your user name', process.env.USER ?? 'me')
  .action(async (opts: { user: string }) => {
    const resolved = config();
    const logger = createLogger({ level: 'warn', secrets: resolved.secrets, destination: process.stderr });
    let running: Awaited<ReturnType<typeof startGateway>> | undefined;
    const cli = createCliChannel({
      user: opts.user, clock: systemClock, input: process.stdin, output: process.stdout,
      onEnd: () => { void running?.stop().then(() => process.exit(0)); },
    });
    running = await startGateway({ config: resolved, listen: false, adapters: [cli], logger });
  });

program.command('sessions').description('list stored sessions (works while the gateway runs)')
  .option('--json', 'print JSON').option('--active', 'only sessions active in the last 24 hours').option('--channel <channel>', 'only this channel')
  .option('--limit <n>', 'at most this many', '1000')
  .action(async (opts: { json?: boolean; active?: boolean; channel?: string; limit: string }) => {
    const resolved = config();
    const store = await KeyvSessionStore.open(resolved.store);
    try {
      const limit = Math.max(1, Number(opts.limit) || 1000);
      const since = Date.now() - 86_400_000;
      const out = [];
      let cursor: string | undefined;
      do {
        const page = await store.list({ channel: opts.channel, limit: Math.min(limit, 1000), cursor });
        for (const e of page.entries) if (!opts.active || e.updatedAt >= since) out.push(e);
        cursor = page.nextCursor;
      } while (cursor && out.length < limit);
      const sessions = out.slice(0, limit).map((e) => ({ ...e, totalTokens: totalTokens(e.tokens) }));
      if (opts.json) {
        process.stdout.write(`${JSON.stringify({ sessions }, null, 2)}\n`);
        return;
      }
      if (!sessions.length) {
        process.stdout.write('No sessions yet.\n');
        return;
      }
      for (const s of sessions) {
        process.stdout.write(`${s.key}\n  id ${s.sessionId} · ${s.channel} · ${s.messageCount} messages · ${s.totalTokens} tokens · updated ${new Date(s.updatedAt).toISOString()}\n`);
      }
    } finally {
      await store.close();
    }
  });

const pairing = program.command('pairing').description('DM pairing: list requests, approve a code, revoke a peer');
const withPairing = async (fn: (store: PairingStore) => Promise<void>) => {
  const resolved = config();
  const store = new PairingStore({ uri: resolved.store, clock: systemClock });
  try {
    await fn(store);
  } finally {
    await store.close();
  }
};
pairing.command('list').description('pending codes and paired peers').option('--json', 'print JSON').action(async (opts: { json?: boolean }) => {
  await withPairing(async (store) => {
    const pending = await store.pending();
    const paired = await store.paired();
    if (opts.json) {
      process.stdout.write(`${JSON.stringify({ pending, paired }, null, 2)}\n`);
      return;
    }
    process.stdout.write(pending.length ? 'Pending:\n' : 'No pending pairing requests.\n');
    for (const p of pending) process.stdout.write(`  ${p.channel} ${p.code}  peer ${p.peerId}${p.name ? ` (${p.name})` : ''}  expires ${new Date(p.expiresAt).toISOString()}\n`);
    if (paired.length) process.stdout.write('Paired:\n');
    for (const p of paired) process.stdout.write(`  ${p.channel} ${p.peerId}${p.name ? ` (${p.name})` : ''}  since ${new Date(p.approvedAt).toISOString()}\n`);
  });
});
pairing.command('approve').description('approve a pairing code').argument('<channel>').argument('<code>').action(async (channel: string, code: string) => {
  await withPairing(async (store) => {
    const peer = await store.approve(channel, code);
    process.stdout.write(`Approved ${channel} peer ${peer.peerId}${peer.name ? ` (${peer.name})` : ''}. Their next message goes through.\n`);
  });
});
pairing.command('revoke').description('remove a paired peer').argument('<channel>').argument('<peer>').action(async (channel: string, peer: string) => {
  await withPairing(async (store) => {
    const removed = await store.revoke(channel, peer);
    process.stdout.write(removed ? `Revoked ${channel} peer ${peer}.\n` : `${channel} peer ${peer} was not paired.\n`);
    if (!removed) process.exitCode = 1;
  });
});

program.command('doctor').description('check the config, secrets, and reachability of the provider and channels').action(async () => {
  const ok = await runDoctor(config(), process.stdout);
  process.exitCode = ok ? 0 : 1;
});

program.parseAsync(process.argv).catch((error: unknown) => {
  if (error instanceof SwitchboardError) {
    process.stderr.write(`switchboard: ${error.message}\n`);
  } else {
    process.stderr.write(`switchboard: ${(error as Error)?.stack ?? String(error)}\n`);
  }
  process.exit(1);
});
