"""RAG with LangChain: SbertEmbeddings + SbertQdrantVectorStore (embedded Qdrant Edge, hybrid search) as the
retriever of an LCEL chain that builds the prompt for your LLM.

The documents are this repository's own Markdown files, one LangChain Document per paragraph (with its file and
paragraph number as metadata). Runs offline with the default model; no LLM is called: the chain stops at the
prompt, which is printed, so that you can see the retrieved context. Pipe it into any chat model
(``... | prompt | ChatOpenAI() | StrOutputParser()``). Adding the same documents again changes nothing (their ids
are derived from their text and metadata).

    pip install "sbert-qdrant[langchain]"
    python examples/langchain_rag.py ["your question"] [--k 3]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from sbert_qdrant.integrations.langchain import SbertEmbeddings, SbertQdrantVectorStore

ROOT = Path(__file__).parent.parent
PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer from the context only; cite the [file #paragraph] you use.\n\nContext:\n{context}"),
        ("human", "{question}"),
    ]
)


def paragraphs(path: Path, words: int = 60) -> list[Document]:
    """One Document per paragraph (long ones cut every ``words`` words, to fit the model's 256 tokens)."""
    docs = []
    for i, block in enumerate(path.read_text(encoding="utf-8").split("\n\n")):
        tokens = block.split()
        for start in range(0, len(tokens), words):
            text = " ".join(tokens[start : start + words])
            if len(text) > 40:
                docs.append(Document(page_content=text, metadata={"file": path.name, "paragraph": i}))
    return docs


def format_docs(docs: list[Document]) -> str:
    return "\n".join(f"[{d.metadata['file']} #{d.metadata['paragraph']}] {d.page_content[:300]}" for d in docs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("question", nargs="?", default="How do I search a collection that langchain-qdrant wrote?")
    parser.add_argument("--k", type=int, default=3, help="paragraphs retrieved")
    args = parser.parse_args()

    docs = [d for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))] for d in paragraphs(path)]
    with tempfile.TemporaryDirectory() as folder:
        store = SbertQdrantVectorStore.from_documents(
            docs, SbertEmbeddings(), collection_name="docs", location=folder, mode="hybrid"
        )
        store.add_documents(docs)  # idempotent: the same ids, overwritten in place
        stored = store.collection.count() if store.collection is not None else 0
        print(f"indexed {len(docs)} paragraphs ({stored} stored)\n")

        retriever = store.as_retriever(search_kwargs={"k": args.k})
        chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | PROMPT
        for message in chain.invoke(args.question).to_messages():
            print(f"--- {message.type}\n{message.content}\n")
        store.close()


if __name__ == "__main__":
    main()
