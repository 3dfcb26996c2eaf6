//! How deep a value's JSON nests, counted on serde's data model as serde_json writes it,
//! without writing it: a string costs nothing however long, so a text part's check is a
//! handful of calls (the text scan, [`crate::part::json_depth`], reads every byte).

use serde::Serialize;
use serde::ser;

/// The most JSON containers (objects, arrays) open at once when serde_json writes
/// `value`; `None` when its `Serialize` fails (serde_json would fail too).
pub(crate) fn depth_of<T: Serialize + ?Sized>(value: &T) -> Option<usize> {
    let mut counter = Counter::default();
    value.serialize(Depth(&mut counter)).ok()?;
    Some(counter.max)
}

#[derive(Default)]
struct Counter {
    at: usize,
    max: usize,
}

impl Counter {
    /// Opens `n` containers.
    fn open(&mut self, n: usize) {
        self.at += n;
        self.max = self.max.max(self.at);
    }
}

/// The failure of a `Serialize` impl (none of Scribe's fails).
#[derive(Debug)]
pub(crate) struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cannot serialize")
    }
}

impl std::error::Error for Failed {}

impl ser::Error for Failed {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Failed
    }
}

struct Depth<'c>(&'c mut Counter);

/// A container being counted: closes `n` levels at its end.
struct Open<'c> {
    counter: &'c mut Counter,
    n: usize,
}

impl Open<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Failed> {
        value.serialize(Depth(self.counter))
    }

    fn close(self) -> Result<(), Failed> {
        self.counter.at -= self.n;
        Ok(())
    }
}

impl<'c> Depth<'c> {
    fn open(self, n: usize) -> Open<'c> {
        self.0.open(n);
        Open { counter: self.0, n }
    }
}

macro_rules! scalars {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, _: $ty) -> Result<(), Failed> {
            Ok(())
        })*
    };
}

impl<'c> ser::Serializer for Depth<'c> {
    type Ok = ();
    type Error = Failed;
    type SerializeSeq = Open<'c>;
    type SerializeTuple = Open<'c>;
    type SerializeTupleStruct = Open<'c>;
    type SerializeTupleVariant = Open<'c>;
    type SerializeMap = Open<'c>;
    type SerializeStruct = Open<'c>;
    type SerializeStructVariant = Open<'c>;

    scalars!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );

    fn serialize_none(self) -> Result<(), Failed> {
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Failed> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Failed> {
        Ok(())
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), Failed> {
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Failed> {
        value.serialize(self)
    }

    /// `{"variant": value}`.
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), Failed> {
        let mut open = self.open(1);
        open.element(value)?;
        open.close()
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Open<'c>, Failed> {
        Ok(self.open(1))
    }

    fn serialize_tuple(self, _: usize) -> Result<Open<'c>, Failed> {
        Ok(self.open(1))
    }

    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Open<'c>, Failed> {
        Ok(self.open(1))
    }

    /// `{"variant": [...]}`.
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Open<'c>, Failed> {
        Ok(self.open(2))
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Open<'c>, Failed> {
        Ok(self.open(1))
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Open<'c>, Failed> {
        Ok(self.open(1))
    }

    /// `{"variant": {...}}`.
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Open<'c>, Failed> {
        Ok(self.open(2))
    }
}

impl ser::SerializeSeq for Open<'_> {
    type Ok = ();
    type Error = Failed;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Failed> {
        self.element(value)
    }
    fn end(self) -> Result<(), Failed> {
        self.close()
    }
}

impl ser::SerializeTuple for Open<'_> {
    type Ok = ();
    type Error = Failed;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Failed> {
        self.element(value)
    }
    fn end(self) -> Result<(), Failed> {
        self.close()
    }
}

impl ser::SerializeTupleStruct for Open<'_> {
    type Ok = ();
    type Error = Failed;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Failed> {
        self.element(value)
    }
    fn end(self) -> Result<(), Failed> {
        self.close()
    }
}

impl ser::SerializeTupleVariant for Open<'_> {
    type Ok = ();
    type Error = Failed;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Failed> {
        self.element(value)
    }
    fn end(self) -> Result<(), Failed> {
        self.close()
    }
}

/// Map keys are strings (or numbers written as strings) in JSON: they nest nothing.
impl ser::SerializeMap for Open<'_> {
    type Ok = ();
    type Error = Failed;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, _: &T) -> Result<(), Failed> {
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Failed> {
        self.element(value)
    }
    fn end(self) -> Result<(), Failed> {
        self.close()
    }
}

impl ser::SerializeStruct for Open<'_> {
    type Ok = ();
    type Error = Failed;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Failed> {
        self.element(value)
    }
    fn end(self) -> Result<(), Failed> {
        self.close()
    }
}

impl ser::SerializeStructVariant for Open<'_> {
    type Ok = ();
    type Error = Failed;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Failed> {
        self.element(value)
    }
    fn end(self) -> Result<(), Failed> {
        self.close()
    }
}
