//! pprof files (`record --pprof`, `report --pprof`) read back as pprof's published
//! `profile.proto` reads them: each branch's energy and its stack samples.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use protobuf::reflect::{FileDescriptor, ReflectValueRef};
use protobuf::Message as _;

/// A pprof profile as pprof's published `profile.proto` reads it.
pub struct Decoded {
    /// The sample types, (type, unit) each.
    pub sample_types: Vec<(String, String)>,
    /// The default sample type.
    pub default_type: String,
    /// Each sample's stack, oldest frame first, and its values.
    pub samples: Vec<(String, Vec<i64>)>,
}

/// Decodes the gzipped pprof file at `path` with protoc (which must accept it) and with the
/// protobuf crate's reflection over the descriptors protoc compiled from `profile.proto`.
pub fn decode(path: &Path) -> Decoded {
    let proto = std::env::var_os("JOULAR_PROFILE_PROTO")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from("/usr/share/gocode/src/github.com/google/pprof/proto/profile.proto")
        });
    assert!(
        proto.is_file(),
        "no profile.proto at {}: run scripts/setup.sh (golang-github-google-pprof-dev)",
        proto.display()
    );
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect("the pprof file"))
        .read_to_end(&mut bytes)
        .expect("a gzip file");
    let raw = path.with_extension("raw");
    std::fs::write(&raw, &bytes).expect("the raw profile");
    let (include, name) = (proto.parent().unwrap(), proto.file_name().unwrap());
    let decoded = Command::new("protoc")
        .arg("-I")
        .arg(include)
        .arg("--decode=perftools.profiles.Profile")
        .arg(name)
        .stdin(std::fs::File::open(&raw).unwrap())
        .output()
        .expect("protoc runs (scripts/setup.sh installs protobuf-compiler)");
    assert!(
        decoded.status.success(),
        "protoc cannot decode {}: {}",
        path.display(),
        String::from_utf8_lossy(&decoded.stderr)
    );
    let descriptors = path.with_extension("desc");
    let status = Command::new("protoc")
        .arg("-I")
        .arg(include)
        .arg("-o")
        .arg(&descriptors)
        .arg(name)
        .status()
        .expect("protoc runs");
    assert!(
        status.success(),
        "protoc cannot compile {}",
        proto.display()
    );
    let set = protobuf::descriptor::FileDescriptorSet::parse_from_bytes(
        &std::fs::read(&descriptors).unwrap(),
    )
    .expect("a descriptor set");
    let file = FileDescriptor::new_dynamic(set.file[0].clone(), &[]).expect("profile.proto");
    let profile = file
        .message_by_package_relative_name("Profile")
        .expect("the Profile message");
    let message = profile.parse_from_bytes(&bytes).expect("a Profile");
    let field = |descriptor: &protobuf::reflect::MessageDescriptor, name: &str| {
        descriptor
            .field_by_name(name)
            .unwrap_or_else(|| panic!("no field {name}"))
    };
    let int = |value: ReflectValueRef| value.to_i64().or(value.to_u64().map(|v| v as i64)).unwrap();
    let strings: Vec<String> = field(&profile, "string_table")
        .get_repeated(&*message)
        .into_iter()
        .map(|s| s.to_str().unwrap().to_string())
        .collect();
    let string = |index: i64| strings[usize::try_from(index).unwrap()].clone();
    let sub = |name: &str| file.message_by_package_relative_name(name).unwrap();
    let (value_type, sample, location, line, function) = (
        sub("ValueType"),
        sub("Sample"),
        sub("Location"),
        sub("Line"),
        sub("Function"),
    );
    let sample_types = field(&profile, "sample_type")
        .get_repeated(&*message)
        .into_iter()
        .map(|t| {
            let t = t.to_message().unwrap();
            (
                string(int(
                    field(&value_type, "type").get_singular_field_or_default(&*t)
                )),
                string(int(
                    field(&value_type, "unit").get_singular_field_or_default(&*t)
                )),
            )
        })
        .collect();
    let functions: HashMap<i64, String> = field(&profile, "function")
        .get_repeated(&*message)
        .into_iter()
        .map(|f| {
            let f = f.to_message().unwrap();
            (
                int(field(&function, "id").get_singular_field_or_default(&*f)),
                string(int(
                    field(&function, "name").get_singular_field_or_default(&*f)
                )),
            )
        })
        .collect();
    let locations: HashMap<i64, String> = field(&profile, "location")
        .get_repeated(&*message)
        .into_iter()
        .map(|l| {
            let l = l.to_message().unwrap();
            let lines = field(&location, "line").get_repeated(&*l);
            assert_eq!(lines.len(), 1, "one function per location");
            let first = lines.get(0).to_message().unwrap();
            let id = int(field(&line, "function_id").get_singular_field_or_default(&*first));
            (
                int(field(&location, "id").get_singular_field_or_default(&*l)),
                functions[&id].clone(),
            )
        })
        .collect();
    let samples = field(&profile, "sample")
        .get_repeated(&*message)
        .into_iter()
        .map(|s| {
            let s = s.to_message().unwrap();
            let mut frames: Vec<String> = field(&sample, "location_id")
                .get_repeated(&*s)
                .into_iter()
                .map(|id| locations[&int(id)].clone())
                .collect();
            frames.reverse();
            let values = field(&sample, "value")
                .get_repeated(&*s)
                .into_iter()
                .map(int)
                .collect();
            (frames.join(";"), values)
        })
        .collect();
    Decoded {
        sample_types,
        default_type: string(int(
            field(&profile, "default_sample_type").get_singular_field_or_default(&*message)
        )),
        samples,
    }
}

impl Decoded {
    /// The energy of each branch, in joules, and its samples (0 in a profile of energy only).
    pub fn branches(&self) -> HashMap<String, (f64, i64)> {
        let mut energy = HashMap::new();
        for (branch, values) in &self.samples {
            let entry = energy.entry(branch.clone()).or_insert((0.0, 0));
            entry.0 += values[0] as f64 / 1e9;
            entry.1 += values.get(1).copied().unwrap_or(0);
        }
        energy
    }
}
