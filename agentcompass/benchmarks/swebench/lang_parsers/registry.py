"""Parser names and the official repo -> parser table of SWE-bench Multilingual (every non-Python repo).

Kept apart from the package ``__init__`` so ``log_parsers`` can import it while either module is loading.
"""

from __future__ import annotations

from collections.abc import Callable

from agentcompass.benchmarks.swebench.lang_parsers import c, go, java, javascript, php, ruby, rust
from agentcompass.benchmarks.swebench.lang_parsers.dispatch import (
    parse_log_immutable_js,
    parse_log_immutable_js_v4,
    parse_log_jekyll,
)

# parser name (the official function name without "parse_log_") -> parser
LANG_PARSERS: dict[str, Callable[[str], dict[str, str]]] = {
    # Go
    "gotest": go.parse_log_gotest,
    # Rust
    "cargo": rust.parse_log_cargo,
    # Java
    "maven": java.parse_log_maven,
    "ant": java.parse_log_ant,
    "gradle_custom": java.parse_log_gradle_custom,
    # C / C++
    "redis": c.parse_log_redis,
    "jq": c.parse_log_jq,
    "doctest": c.parse_log_doctest,
    "micropython_test": c.parse_log_micropython_test,
    "googletest": c.parse_log_googletest,
    # PHP
    "phpunit": php.parse_log_phpunit,
    # Ruby
    "minitest": ruby.parse_log_minitest,
    "cucumber": ruby.parse_log_cucumber,
    "ruby_unit": ruby.parse_log_ruby_unit,
    "rspec_transformed_json": ruby.parse_log_rspec_transformed_json,
    "jekyll": parse_log_jekyll,
    # JavaScript / TypeScript
    "calypso": javascript.parse_log_calypso,
    "chart_js": javascript.parse_log_chart_js,
    "marked": javascript.parse_log_marked,
    "p5js": javascript.parse_log_p5js,
    "react_pdf": javascript.parse_log_react_pdf,
    "jest": javascript.parse_log_jest,
    "jest_json": javascript.parse_log_jest_json,
    "vitest": javascript.parse_log_vitest,
    "karma": javascript.parse_log_karma,
    "tap": javascript.parse_log_tap,
    "immutable_js": parse_log_immutable_js,
}

#: swebench 4.1.0's parsers where they differ from 5.0.2's (the rest read logs the same in both)
LANG_PARSERS_V4: dict[str, Callable[[str], dict[str, str]]] = {
    "maven": java.parse_log_maven_v4,
    "gradle_custom": java.parse_log_gradle_custom_v4,
    "jest": javascript.parse_log_jest_v4,
    "immutable_js": parse_log_immutable_js_v4,
}

LANG_REPO_TO_PARSER_NAME: dict[str, str] = {
    # C / C++
    "redis/redis": "redis",
    "jqlang/jq": "jq",
    "nlohmann/json": "doctest",
    "micropython/micropython": "micropython_test",
    "valkey-io/valkey": "redis",
    "fmtlib/fmt": "googletest",
    # Go
    "caddyserver/caddy": "gotest",
    "hashicorp/terraform": "gotest",
    "prometheus/prometheus": "gotest",
    "gohugoio/hugo": "gotest",
    "gin-gonic/gin": "gotest",
    # Java
    "google/gson": "maven",
    "apache/druid": "maven",
    "javaparser/javaparser": "maven",
    "projectlombok/lombok": "ant",
    "apache/lucene": "gradle_custom",
    "reactivex/rxjava": "gradle_custom",
    # JavaScript / TypeScript
    "Automattic/wp-calypso": "calypso",
    "chartjs/Chart.js": "chart_js",
    "markedjs/marked": "marked",
    "processing/p5.js": "p5js",
    "diegomura/react-pdf": "react_pdf",
    "babel/babel": "jest",
    "vuejs/core": "vitest",
    "facebook/docusaurus": "jest",
    "immutable-js/immutable-js": "immutable_js",
    "mrdoob/three.js": "tap",
    "preactjs/preact": "karma",
    "axios/axios": "tap",
    # PHP
    "phpoffice/phpspreadsheet": "phpunit",
    "laravel/framework": "phpunit",
    "php-cs-fixer/php-cs-fixer": "phpunit",
    "briannesbitt/carbon": "phpunit",
    # Ruby
    "jekyll/jekyll": "jekyll",
    "fluent/fluentd": "ruby_unit",
    "fastlane/fastlane": "rspec_transformed_json",
    "jordansissel/fpm": "rspec_transformed_json",
    "faker-ruby/faker": "ruby_unit",
    "rubocop/rubocop": "rspec_transformed_json",
    # Rust
    "burntsushi/ripgrep": "cargo",
    "sharkdp/bat": "cargo",
    "astral-sh/ruff": "cargo",
    "tokio-rs/tokio": "cargo",
    "uutils/coreutils": "cargo",
    "nushell/nushell": "cargo",
    "tokio-rs/axum": "cargo",
}
