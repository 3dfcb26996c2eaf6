//! Deterministic workload: realistic message text (prose skewed towards common words,
//! code identifiers and paths, ~10% of messages with CJK) and messages of 1–3 parts, all
//! from one seeded generator so every run stores the same content.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use scribe_message::{
    Extra, FinishReason, Part, Role, StepFinishPart, TokenUsage, ToolPart, ToolState,
};
use serde_json::json;

/// Common words, most frequent first (drawn with a rough Zipf skew).
pub const WORDS: &[&str] = &[
    "the",
    "to",
    "and",
    "error",
    "function",
    "file",
    "test",
    "value",
    "return",
    "we",
    "should",
    "this",
    "that",
    "config",
    "build",
    "run",
    "check",
    "update",
    "change",
    "fix",
    "data",
    "request",
    "response",
    "server",
    "client",
    "query",
    "index",
    "database",
    "connection",
    "pool",
    "timeout",
    "retry",
    "cache",
    "session",
    "message",
    "token",
    "model",
    "deploy",
    "release",
    "version",
    "branch",
    "commit",
    "merge",
    "review",
    "issue",
    "feature",
    "module",
    "crate",
    "compile",
    "warning",
    "panic",
    "thread",
    "async",
    "await",
    "future",
    "stream",
    "buffer",
    "socket",
    "handler",
    "router",
    "middleware",
    "schema",
    "migration",
    "column",
    "table",
    "row",
    "transaction",
    "lock",
    "mutex",
    "channel",
    "worker",
    "queue",
    "job",
    "parser",
    "lexer",
    "syntax",
    "tree",
    "node",
    "graph",
    "edge",
    "vertex",
    "path",
    "directory",
    "permission",
    "user",
    "account",
    "password",
    "secret",
    "key",
    "certificate",
    "latency",
    "throughput",
    "benchmark",
    "profile",
    "memory",
    "allocation",
    "leak",
    "garbage",
];

/// Words that occur in only a handful of messages.
pub const RARE: &[&str] = &[
    "zeitgeist",
    "quokka",
    "flibbertigibbet",
    "xylophone",
    "kumquat",
    "obfuscation",
    "serendipity",
    "palimpsest",
    "ouroboros",
    "heliotrope",
];

/// Code identifiers, paths and names as they appear in coding conversations.
pub const IDENTS: &[&str] = &[
    "chat-send",
    "my-app.config.ts",
    "sp_new1",
    "P2.2",
    "handle_request",
    "parseQueryString",
    "src/db/pool.rs",
    "HashMap::new",
    "tokio::spawn",
    "useEffect",
    "fetch_user_by_id",
    "MAX_RETRIES",
    "Cargo.toml",
    "package.json",
    "docker-compose.yml",
    "api/v2/users",
];

/// CJK sentences (Chinese, Japanese, Korean).
pub const CJK: &[&str] = &[
    "数据库连接池配置错误，需要检查超时设置。",
    "这是中文文本，用于测试搜索功能。",
    "请把这个函数重构一下，然后运行测试。",
    "部署失败了，日志里有权限错误。",
    "クエリのデータベース接続がタイムアウトしました。",
    "한국어 검색 테스트 문장입니다.",
];

const TOOLS: &[&str] = &["bash", "read", "grep", "edit"];

/// A seeded source of message content.
#[derive(Debug)]
pub struct Gen {
    rng: StdRng,
}

impl Gen {
    /// A generator whose output depends only on `seed`.
    pub fn new(seed: u64) -> Self {
        Gen {
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// A uniform index below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.rng.random_range(0..n.max(1))
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// Skewed towards the start of `items` (the smaller of two uniform draws).
    fn zipf<'a>(&mut self, items: &[&'a str]) -> &'a str {
        let (a, b) = (self.below(items.len()), self.below(items.len()));
        items[a.min(b)]
    }

    /// Text of `min`–`max` bytes: prose, identifiers, a rare word now and then, and in
    /// about one message in ten, CJK sentences.
    pub fn text(&mut self, min: usize, max: usize) -> String {
        let target = self.rng.random_range(min..=max);
        let mut out = String::with_capacity(target + 64);
        let cjk = self.below(10) == 0;
        while out.len() < target {
            let roll = self.below(1_000);
            let piece = if cjk && roll < 300 {
                self.pick(CJK)
            } else if roll < 80 {
                self.pick(IDENTS)
            } else if roll < 82 {
                self.pick(RARE)
            } else if roll < 110 {
                "connection pool"
            } else {
                self.zipf(WORDS)
            };
            out.push_str(piece);
            out.push(if self.below(12) == 0 { '.' } else { ' ' });
            if self.below(40) == 0 {
                out.push('\n');
            }
        }
        out
    }

    /// The parts of the `n`-th message of a conversation (even: user, odd: assistant), 1–3
    /// of them: a user message is its text and the finish part `MessageService::create`
    /// would add; an assistant message is its text, then maybe a completed tool call and a
    /// step-finish with usage. `time` stamps the tool call and finish part.
    pub fn message(&mut self, n: usize, time: i64) -> (Role, Vec<Part>) {
        let assistant = n % 2 == 1;
        let mut parts = vec![Part::text(self.text(200, 2_000))];
        if !assistant {
            parts.push(Part::finish(FinishReason::EndTurn, time));
            return (Role::User, parts);
        }
        if self.below(3) == 0 {
            let command = format!("{} {}", self.pick(IDENTS), self.zipf(WORDS));
            parts.push(Part::Tool(ToolPart {
                call_id: format!("call_{n}"),
                tool: self.pick(TOOLS).to_owned(),
                input: json!({ "command": command }),
                state: ToolState::Completed {
                    output: self.text(100, 600),
                    title: "done".to_owned(),
                    metadata: serde_json::Value::Null,
                    started_at: time,
                    ended_at: time + 5,
                },
                compacted_at: None,
                extra: Extra::new(),
            }));
        }
        if self.below(2) == 0 {
            parts.push(Part::StepFinish(StepFinishPart {
                reason: FinishReason::EndTurn,
                tokens: TokenUsage {
                    input: 1_000 + i64::try_from(self.below(20_000)).unwrap_or(0),
                    output: 200,
                    ..TokenUsage::default()
                },
                cost: 0.01,
                extra: Extra::new(),
            }));
        }
        (Role::Assistant, parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_content() {
        let (mut a, mut b) = (Gen::new(7), Gen::new(7));
        for n in 0..20 {
            assert_eq!(a.message(n, 1), b.message(n, 1));
        }
    }

    #[test]
    fn messages_have_one_to_three_parts_of_realistic_size() {
        let mut g = Gen::new(1);
        for n in 0..200 {
            let (_, parts) = g.message(n, 1);
            assert!((1..=3).contains(&parts.len()));
            let Part::Text(text) = &parts[0] else {
                panic!("first part is text")
            };
            assert!(text.text.len() >= 200 && text.text.len() <= 2_100);
        }
    }
}
