// An MCP server of our own, on the official TypeScript SDK (1.32.2), that counts the calls it
// receives: the upstream behind agentgate's MCP backend in the crash tests of
// crates/agentgate/tests/external/mcp_backend.rs, which must see a tool that is not
// idempotent called exactly once, whatever happens to agentgate.
//
//   COUNT_FILE=/tmp/calls node counting-server.mjs      (stdio)
//
// Every call appends one line `TOOL` to COUNT_FILE before it does anything else, and a call
// the client cancels appends `cancelled TOOL: REASON` (the reason the client's
// notifications/cancelled gave; `closed` when the connection closed instead). Tools:
//   slow_write {seconds}  not idempotent; reports progress every second, then answers
//   slow_read  {seconds}  readOnlyHint + idempotentHint; the same
//   die_midway            not idempotent; the process exits 200 ms into the call
import { appendFileSync } from 'node:fs';
import process from 'node:process';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const countFile = process.env.COUNT_FILE;
if (!countFile) {
  console.error('counting-server: set COUNT_FILE');
  process.exit(2);
}
const count = (tool) => appendFileSync(countFile, `${tool}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const server = new McpServer({ name: 'counting-server', version: '1.0.0' });

async function slow(tool, seconds, extra) {
  count(tool);
  extra.signal.addEventListener('abort', () => {
    const reason = typeof extra.signal.reason === 'string' ? extra.signal.reason : 'closed';
    count(`cancelled ${tool}: ${reason}`);
  });
  const token = extra._meta?.progressToken;
  for (let i = 1; i <= seconds; i++) {
    await sleep(1000);
    if (token !== undefined) {
      await extra.sendNotification({
        method: 'notifications/progress',
        params: { progressToken: token, progress: i, total: seconds, message: `second ${i}` },
      });
    }
  }
  return { content: [{ type: 'text', text: `${tool} done after ${seconds}s` }] };
}

server.registerTool(
  'slow_write',
  {
    description: 'Writes something slowly (not idempotent).',
    inputSchema: { seconds: z.number().int().min(0).max(600) },
    annotations: { idempotentHint: false, readOnlyHint: false },
  },
  async ({ seconds }, extra) => slow('slow_write', seconds, extra),
);

server.registerTool(
  'slow_read',
  {
    description: 'Reads something slowly (safe to repeat).',
    inputSchema: { seconds: z.number().int().min(0).max(600) },
    annotations: { idempotentHint: true, readOnlyHint: true },
  },
  async ({ seconds }, extra) => slow('slow_read', seconds, extra),
);

server.registerTool(
  'die_midway',
  {
    description: 'Starts, then the server process dies.',
    inputSchema: {},
    annotations: { idempotentHint: false },
  },
  async () => {
    count('die_midway');
    setTimeout(() => process.exit(3), 200);
    await sleep(60_000);
    return { content: [{ type: 'text', text: 'unreachable' }] };
  },
);

await server.connect(new StdioServerTransport());
