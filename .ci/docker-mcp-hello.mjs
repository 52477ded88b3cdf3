// The smallest stdio MCP server (newline-delimited JSON-RPC 2.0 on stdin and stdout, as the MCP
// stdio transport specifies), for .ci/docker: the deploy/mcp-node image runs it with node and
// the bot calls its one tool, "greet".
import { createInterface } from "node:readline";

const send = (msg) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...msg }) + "\n");

createInterface({ input: process.stdin }).on("line", (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    send({ id: null, error: { code: -32700, message: "parse error" } });
    return;
  }
  if (msg.id === undefined) return; // a notification (notifications/initialized): no answer
  switch (msg.method) {
    case "initialize":
      send({
        id: msg.id,
        result: {
          protocolVersion: msg.params?.protocolVersion ?? "2025-06-18",
          capabilities: { tools: {} },
          serverInfo: { name: "hello", version: "1.0.0" },
        },
      });
      break;
    case "ping":
      send({ id: msg.id, result: {} });
      break;
    case "tools/list":
      send({
        id: msg.id,
        result: {
          tools: [{
            name: "greet",
            description: "Greets someone by name.",
            inputSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
          }],
        },
      });
      break;
    case "tools/call": {
      const name = msg.params?.arguments?.name ?? "nobody";
      send({ id: msg.id, result: { content: [{ type: "text", text: `hello ${name}, from node ${process.version}` }] } });
      break;
    }
    default:
      send({ id: msg.id, error: { code: -32601, message: `method not found: ${msg.method}` } });
  }
});
