// A real MCP client nobody here wrote: the MCP TypeScript SDK drives `sbert-qdrant mcp` over stdio.
// Usage: node mcp_client.mjs <python> <store folder>; prints one JSON object of what it saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [python, folder] = process.argv.slice(2);

async function connect(extra) {
  const transport = new StdioClientTransport({
    command: python,
    args: ["-m", "sbert_qdrant", "mcp"],
    env: { ...process.env, SBERT_QDRANT_LOCATION: folder, COLLECTION_NAME: "notes", ...extra },
    stderr: "ignore",
  });
  const client = new Client({ name: "ts-sdk-test", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

const call = async (client, name, args) => {
  const result = await client.callTool({ name, arguments: args });
  return { isError: Boolean(result.isError), text: result.content[0].text, structured: result.structuredContent };
};

const seen = {};
const writer = await connect({});
seen.tools = (await writer.listTools()).tools.map((t) => t.name).sort();
seen.empty = await call(writer, "qdrant-find", { query: "anything" });
seen.stored = await call(writer, "qdrant-store", { information: "I parked the car on level 3 of the airport garage." });
await call(writer, "qdrant-store", { information: "My sister's birthday is on the 14th of March." });
seen.found = await call(writer, "qdrant-find", { query: "where did I leave the car?", limit: 1 });
const documentText = Array.from({ length: 40 }, (_, i) => `Paragraph ${i}: the boiler is serviced every October by the plumber, who checks the pressure.`).join(" ");
seen.document = await call(writer, "qdrant-store-document", { document: documentText, id: "boiler-manual" });
seen.documents = await call(writer, "qdrant-find-documents", { query: "when is the boiler serviced?", passages: 1 });
seen.unknown = await call(writer, "qdrant-find", { query: "car", colour: "red" });
await writer.close();

const reader = await connect({ QDRANT_READ_ONLY: "true" });
seen.readOnlyTools = (await reader.listTools()).tools.map((t) => t.name).sort();
seen.readOnlyFound = await call(reader, "qdrant-find", { query: "birthday", limit: 1 });
seen.readOnlyStore = await call(reader, "qdrant-store", { information: "a new note" });
await reader.close();
console.log(JSON.stringify(seen));
