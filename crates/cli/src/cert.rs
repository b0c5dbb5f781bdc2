//! `cellar cert`: a development CA and its certificates in one directory, so that TLS is one
//! command away (`docs/security.md`). `create` makes the CA, a server certificate and a client
//! certificate for the user; `server` and `client` issue more from the same CA.

use cellar_server::security::certs::{DevCa, Issued, Leaf};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Make a CA (ca.pem, ca.key), a server certificate (server.pem, server.key) for
    /// localhost, 127.0.0.1, ::1, this machine's name and every --host, and a client
    /// certificate for --user (USER.pem, USER.key, USER.keystore.pem). An existing CA in the
    /// directory is kept and issues the new certificates.
    Create {
        #[command(flatten)]
        common: Common,
        /// More names or addresses the server is reached by.
        #[arg(long, value_name = "HOST")]
        host: Vec<String>,
        /// The user of the client certificate [default: $USER, else "cellar"].
        #[arg(long, value_name = "NAME")]
        user: Option<String>,
    },
    /// Issue another server certificate (server.pem, server.key, or NAME.pem with --name).
    Server {
        #[command(flatten)]
        common: Common,
        /// Names or addresses the server is reached by (localhost, 127.0.0.1 and ::1 are
        /// always in it unless --only-hosts).
        #[arg(long, value_name = "HOST")]
        host: Vec<String>,
        /// Name only the --host names, not localhost and the loopback addresses.
        #[arg(long)]
        only_hosts: bool,
        /// The file name to write, without extension [default: server].
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
    },
    /// Issue a client certificate whose CN is the user NAME (NAME.pem, NAME.key, and
    /// NAME.keystore.pem: key and certificate in one file, HBase's PEM key store).
    Client {
        /// The user.
        name: String,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(clap::Args)]
struct Common {
    /// Where the CA and the certificates live.
    #[arg(long, value_name = "DIR", default_value = "cellar-certs")]
    dir: PathBuf,
    /// Days the new certificate is valid.
    #[arg(long, value_name = "N", default_value_t = 365, value_parser = clap::value_parser!(u64).range(1..=36500))]
    valid_days: u64,
    /// Issue a certificate that expired yesterday (to check that servers refuse it).
    #[arg(long)]
    expired: bool,
}

impl Common {
    fn leaf(&self, cn: &str) -> Leaf {
        let mut leaf = Leaf::new(cn);
        let now = SystemTime::now();
        let day = Duration::from_secs(24 * 3600);
        if self.expired {
            leaf.not_before = now - 30 * day;
            leaf.not_after = now - day;
        } else {
            leaf.not_after = now + Duration::from_secs(self.valid_days * 24 * 3600);
        }
        leaf
    }
}

pub fn run(args: Args) -> Result<(), String> {
    match args.command {
        Command::Create { common, host, user } => {
            let user = user.unwrap_or_else(default_user);
            let ca = open_ca(&common.dir, true)?;
            server(&ca, &common, &host, false, "server")?;
            client(&ca, &common, &user)?;
            let d = common.dir.display();
            println!("\nTLS for a server that requires client certificates:");
            println!("  cellar standalone --tls-cert {d}/server.pem --tls-key {d}/server.key --tls-client-ca {d}/ca.pem");
            println!("  cellar shell --tls-ca {d}/ca.pem --tls-cert {d}/{user}.pem --tls-key {d}/{user}.key");
            println!("HBase Java client: hbase.client.netty.tls.enabled=true, hbase.rpc.tls.truststore.location={d}/ca.pem and .type=PEM,");
            println!("  hbase.rpc.tls.keystore.location={d}/{user}.keystore.pem and .type=PEM");
            Ok(())
        }
        Command::Server {
            common,
            host,
            only_hosts,
            name,
        } => {
            let ca = open_ca(&common.dir, false)?;
            server(
                &ca,
                &common,
                &host,
                only_hosts,
                name.as_deref().unwrap_or("server"),
            )
        }
        Command::Client { name, common } => {
            let ca = open_ca(&common.dir, false)?;
            client(&ca, &common, &name)
        }
    }
}

fn default_user() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "cellar".into())
}

/// The directory's CA; made when `create` and there is none.
fn open_ca(dir: &Path, create: bool) -> Result<DevCa, String> {
    let cert = dir.join("ca.pem");
    let key = dir.join("ca.key");
    if cert.exists() || key.exists() {
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
        };
        let ca = DevCa::load(&read(&cert)?, &read(&key)?)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        println!("using the CA in {}", cert.display());
        return Ok(ca);
    }
    if !create {
        return Err(format!(
            "no CA in {} (ca.pem, ca.key): make one with `cellar cert create --dir {}`",
            dir.display(),
            dir.display()
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let ca = DevCa::create("Cellar development CA")?;
    write(&cert, ca.cert_pem(), false)?;
    write(&key, ca.key_pem(), true)?;
    Ok(ca)
}

fn server(
    ca: &DevCa,
    common: &Common,
    hosts: &[String],
    only_hosts: bool,
    name: &str,
) -> Result<(), String> {
    let mut names: Vec<String> = Vec::new();
    if !only_hosts {
        names.extend(["localhost", "127.0.0.1", "::1"].map(String::from));
        if let Some(h) = hostname() {
            names.push(h);
        }
    }
    for h in hosts {
        if !names.contains(h) {
            names.push(h.clone());
        }
    }
    if names.is_empty() {
        return Err("a server certificate needs at least one --host".into());
    }
    let mut leaf = common.leaf(&names[0]);
    leaf.hosts = names.clone();
    // A cluster's servers also call each other with it.
    leaf.server = true;
    leaf.client = true;
    let issued = ca.issue(&leaf)?;
    write_pair(&common.dir, name, &issued, false)?;
    println!("server certificate for {}", names.join(", "));
    Ok(())
}

fn client(ca: &DevCa, common: &Common, user: &str) -> Result<(), String> {
    cellar_server::security::identity::check_user(user)?;
    if user.contains('/') || user.starts_with('.') || user == "ca" || user == "server" {
        return Err(format!(
            "{user:?} cannot be a file name here: choose another user name"
        ));
    }
    let mut leaf = common.leaf(user);
    leaf.client = true;
    let issued = ca.issue(&leaf)?;
    write_pair(&common.dir, user, &issued, true)?;
    println!("client certificate for user {user}");
    Ok(())
}

/// NAME.pem and NAME.key, and for a client NAME.keystore.pem (key, then certificate).
fn write_pair(dir: &Path, name: &str, issued: &Issued, keystore: bool) -> Result<(), String> {
    write(&dir.join(format!("{name}.pem")), &issued.cert_pem, false)?;
    write(&dir.join(format!("{name}.key")), &issued.key_pem, true)?;
    if keystore {
        let both = format!("{}{}", issued.key_pem, issued.cert_pem);
        write(&dir.join(format!("{name}.keystore.pem")), &both, true)?;
    }
    Ok(())
}

/// Writes a whole file under a temporary name and renames it (never half-written); keys are
/// readable by their owner only.
fn write(path: &Path, text: &str, secret: bool) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if secret { 0o600 } else { 0o644 })
        .open(&tmp)
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

fn hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim();
    (!name.is_empty() && name != "localhost").then(|| name.to_string())
}
