//! RFC 4180 CSV, as spreadsheets and Python's `csv` write it: quoted fields may hold commas,
//! quotes (doubled) and line breaks. Small and strict: a quote that does not close is an
//! error with its line.

/// A row that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct CsvError {
    /// 1-based line where the row starts.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// The rows of `text` (the header included), each with the line it starts on.
pub fn rows(text: &str) -> Result<Vec<(usize, Vec<String>)>, CsvError> {
    let mut out = Vec::new();
    let mut field = String::new();
    let mut row: Vec<String> = Vec::new();
    let mut line = 1;
    let mut start = 1;
    let mut quoted = false;
    let mut at_start = true;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                '\n' => {
                    line += 1;
                    field.push(c);
                }
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' if at_start => {
                quoted = true;
                at_start = false;
            }
            ',' => {
                row.push(std::mem::take(&mut field));
                at_start = true;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                row.push(std::mem::take(&mut field));
                if !(row.len() == 1 && row[0].is_empty()) {
                    out.push((start, std::mem::take(&mut row)));
                }
                row.clear();
                line += 1;
                start = line;
                at_start = true;
            }
            _ => {
                field.push(c);
                at_start = false;
            }
        }
    }
    if quoted {
        return Err(CsvError {
            line: start,
            message: "a quoted field does not close".into(),
        });
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        out.push((start, row));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_keep_commas_quotes_and_newlines() {
        let r = rows("a,b,c\r\n1,\"x, \"\"y\"\"\nz\",3\n\n4,,6").unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(
            r[1],
            (2, vec!["1".into(), "x, \"y\"\nz".into(), "3".into()])
        );
        assert_eq!(r[2], (5, vec!["4".into(), String::new(), "6".into()]));
        assert_eq!(rows("a\n\"open").unwrap_err().line, 2);
    }
}
