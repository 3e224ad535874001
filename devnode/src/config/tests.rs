use super::*;

#[test]
fn a_bare_sim_url_gives_the_defaults() {
    assert_eq!(
        DevNodeConfig::from_sim_url("sim://"),
        Ok(DevNodeConfig::default())
    );
    assert_eq!(
        DevNodeConfig::from_sim_url("sim:///"),
        Ok(DevNodeConfig::default())
    );
}

#[test]
fn sim_url_options_map_to_fields() {
    let cfg = DevNodeConfig::from_sim_url(
        "sim://?seed=9&blocks=5000&fault-429=0.5&latency=10ms&too_many_style=alchemy&max_rps=20&key=k\
         &fault_repeated_logs=1&fault-conflicting-log=0.25",
    )
    .expect("valid options");
    assert_eq!(cfg.faults.repeated_logs, 1.0);
    assert_eq!(cfg.faults.conflicting_log, 0.25);
    assert_eq!(cfg.seed, 9);
    assert_eq!(cfg.chain.blocks, 5000);
    assert_eq!(cfg.faults.http_429, 0.5);
    assert_eq!(cfg.faults.latency, Duration::from_millis(10));
    assert_eq!(cfg.limits.too_many_style, TooManyStyle::Alchemy);
    assert_eq!(cfg.faults.max_rps, Some(20));
    assert_eq!(cfg.key, "k");
}

#[test]
fn the_anon_contract_is_off_unless_switched_on() {
    assert!(!DevNodeConfig::default().chain.anon_contract);
    let on = DevNodeConfig::from_sim_url("sim://?anon_contract=on").expect("valid option");
    assert!(on.chain.anon_contract);
    let off = DevNodeConfig::from_sim_url("sim://?anon-contract=off").expect("valid option");
    assert_eq!(off, DevNodeConfig::default());
    let err = DevNodeConfig::from_sim_url("sim://?anon_contract=maybe").expect_err("no switch");
    assert!(
        err.contains("anon_contract") && err.contains("on or off"),
        "{err}"
    );
}

#[test]
fn the_factory_is_off_unless_switched_on_or_given_children() {
    assert_eq!(DevNodeConfig::default().chain.factory, None);
    let on = DevNodeConfig::from_sim_url("sim://?factory=on").expect("valid option");
    assert_eq!(on.chain.factory, Some(FactoryConfig::default()));
    let sized = DevNodeConfig::from_sim_url("sim://?factory_bursts=2&factory-children=40")
        .expect("valid options");
    assert_eq!(
        sized.chain.factory,
        Some(FactoryConfig {
            children: 40,
            bursts: 2
        })
    );
    let off = DevNodeConfig::from_sim_url("sim://?factory_children=40&factory=off")
        .expect("valid options");
    assert_eq!(off, DevNodeConfig::default());
    let none = DevNodeConfig::from_sim_url("sim://?factory_children=0").expect("valid option");
    assert_eq!(none.chain.factory, None);
    let err = DevNodeConfig::from_sim_url("sim://?factory_children=many").expect_err("no number");
    assert!(err.contains("factory_children"), "{err}");
    let preset =
        DevNodeConfig::from_sim_url("sim://?preset=factory&blocks=20000").expect("valid options");
    assert_eq!(
        preset.chain,
        ChainConfig {
            blocks: 20_000,
            ..ChainConfig::factory_preset()
        }
    );
    let err = DevNodeConfig::from_sim_url("sim://?preset=huge").expect_err("no preset");
    assert!(
        err.contains("default, long, sparse, factory, overcap"),
        "{err}"
    );
}

#[test]
fn finality_answers_a_block_unless_set_to_null_or_error() {
    assert_eq!(DevNodeConfig::default().chain.finality, Finality::Block);
    for (text, finality) in [
        ("block", Finality::Block),
        ("null", Finality::Null),
        ("error", Finality::Error),
    ] {
        let cfg =
            DevNodeConfig::from_sim_url(&format!("sim://?finality={text}")).expect("valid option");
        assert_eq!(cfg.chain.finality, finality);
    }
    let err = DevNodeConfig::from_sim_url("sim://?finality=none").expect_err("not a mode");
    assert!(
        err.contains("finality") && err.contains("block, null or error"),
        "{err}"
    );
}

#[test]
fn a_bad_option_is_named_with_a_suggestion() {
    let err = DevNodeConfig::from_sim_url("sim://?sede=1").expect_err("unknown option");
    assert!(err.contains("\"sede\"") && err.contains("seed"), "{err}");
    let err = DevNodeConfig::from_sim_url("sim://?fault_429=2").expect_err("not a probability");
    assert!(err.contains("fault_429"), "{err}");
    assert!(DevNodeConfig::from_sim_url("http://x").is_err());
}

#[test]
fn high_log_indexes_are_off_unless_a_block_is_named() {
    assert_eq!(DevNodeConfig::default().chain.high_log_indexes, None);
    let cfg = DevNodeConfig::from_sim_url("sim://?high_log_indexes=300").expect("valid option");
    assert_eq!(cfg.chain.high_log_indexes, Some(300));
    assert_eq!(cfg.chain.log_index_base, 0xffff_ffe2);
    let cfg = DevNodeConfig::from_sim_url(
        "sim://?log-index-base=0x8000000000000000&high-log-indexes=300",
    )
    .expect("valid options");
    assert_eq!(
        (cfg.chain.high_log_indexes, cfg.chain.log_index_base),
        (Some(300), 1 << 63)
    );
    let off = DevNodeConfig::from_sim_url("sim://?high_log_indexes=off").expect("valid option");
    assert_eq!(off, DevNodeConfig::default());
    let err = DevNodeConfig::from_sim_url("sim://?log_index_base=-1").expect_err("not an index");
    assert!(err.contains("log_index_base"), "{err}");
}

#[test]
fn credits_and_a_lagging_node_are_options() {
    let cfg = DevNodeConfig::from_sim_url(
        "sim://?max_cps=330&method_credits=eth_getLogs:75,eth_getBlockByNumber:16,default:26&lag-blocks=4",
    )
    .expect("valid options");
    assert_eq!(cfg.faults.max_cps, Some(330));
    assert_eq!(cfg.faults.method_credits.of(Some("eth_getLogs")), 75);
    assert_eq!(
        cfg.faults.method_credits.of(Some("eth_getBlockReceipts")),
        26
    );
    assert_eq!(cfg.faults.lag_blocks, 4);
    let default = DevNodeConfig::default().faults;
    assert_eq!((default.max_cps, default.lag_blocks), (None, 0));
    assert_eq!(default.method_credits.of(Some("eth_getBlockReceipts")), 500);
    let err =
        DevNodeConfig::from_sim_url("sim://?method_credits=eth_getLogs").expect_err("no price");
    assert!(err.contains("method_credits"), "{err}");
    let err = DevNodeConfig::from_sim_url("sim://?max_cpz=3").expect_err("unknown option");
    assert!(err.contains("max_cps"), "{err}");
}
